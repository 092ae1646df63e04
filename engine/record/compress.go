package record

import "fmt"

// decompress returns the decompressed form of src (a fresh buffer).
// magic selects legacy quirks (KAFKA-3160 lz4 header checksum for magic 0).
func decompress(c Codec, src []byte, magic int) ([]byte, error) {
	return nil, fmt.Errorf("%w: codec %v not implemented yet", ErrUnsupported, c)
}

// compress appends the compressed form of src to dst.
func compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	return dst, fmt.Errorf("%w: codec %v not implemented yet", ErrUnsupported, c)
}
