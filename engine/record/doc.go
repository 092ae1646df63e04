// Package record implements Kafka's record batch formats, byte for byte as a
// broker writes them to .log files: RecordBatch v2 (magic 2, read and write),
// the legacy message formats v0/v1 (read only, including compressed wrappers),
// and the gzip, snappy (xerial), lz4 (Kafka's frame) and zstd codecs.
//
// A .log file is a plain concatenation of entries, each starting with the
// 12-byte log overhead (offset int64, size int32) and the magic byte at
// offset 16. ReadAt walks a file entry by entry, following Kafka's
// FileLogInputStream; Parse decodes one entry held in memory. Neither checks
// the CRC (Verify does) nor decodes the records (Records does), so scans that
// need only offsets and sizes stay cheap.
//
// Reading a segment:
//
//	var buf []byte
//	for pos := int64(0); ; {
//		b, err := record.ReadAt(f, pos, size, buf)
//		if err == io.EOF {
//			break // clean end
//		}
//		if err != nil {
//			return err // ErrTruncated: torn tail; ErrCorrupt: bad bytes
//		}
//		if err := b.Verify(); err != nil {
//			return err
//		}
//		recs, err := b.Records(nil) // offsets and timestamps absolute
//		...
//		buf = b.Raw[:0]
//		pos += int64(b.Size())
//	}
//
// Writing a batch (the broker then assigns offsets and epochs in place):
//
//	spec := record.NewBatchSpec(0)
//	spec.Codec = record.LZ4
//	raw, err := record.Encode(nil, spec, recs)
//	record.SetBaseOffset(raw, logEndOffset)
//	record.SetPartitionLeaderEpoch(raw, epoch)
//
// All functions are safe for concurrent use; a Batch aliases the bytes it was
// read from, and the records Records returns do not. Errors wrap ErrCorrupt,
// ErrTruncated or ErrUnsupported; test them with errors.Is.
//
// The byte layouts are documented above their encoders and decoders:
// batch.go (v2 header), decode.go (v2 record), varint.go, legacy.go,
// snappy.go, lz4.go, compress.go (codec framing), control.go (markers).
//
// Owns: the batch and record byte formats and the codecs. Imports: only the
// standard library, klauspost/compress and pierrec/lz4. Must not import the
// rest of engine, fusefs, go-fuse or policies (internal/archtest).
package record
