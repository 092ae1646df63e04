//go:build !amd64

package record

const canFold = false

func foldCastagnoli(crc uint32, p []byte, k *foldKeys) uint32 { panic("record: no folding CRC here") }
