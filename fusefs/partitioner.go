package fusefs

// murmur2 is Kafka's Utils.murmur2: the 32-bit MurmurHash2 variant with seed
// 0x9747b28c that the Java producer's default partitioner hashes keys with.
// It must stay bit-for-bit equal to Kafka's, or keyed records land in other
// partitions than a Kafka producer would put them.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	n4 := n / 4
	for i := 0; i < n4; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// toPositive is Kafka's Utils.toPositive: clears the sign bit (not abs).
func toPositive(v int32) int32 { return v & 0x7fffffff }

// partitionForKey is Kafka's BuiltInPartitioner.partitionForKey.
func partitionForKey(key []byte, numPartitions int) int {
	return int(toPositive(murmur2(key))) % numPartitions
}
