package dataset

import (
	"encoding/binary"
	"unsafe"
)

// hostLittleEndian reports whether in-memory integers are little-endian, so
// that Arrow buffers and index arrays can be viewed in place.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// int32View returns b as []int32 without copying, or nil when that is not
// possible (big-endian host, misaligned data, or len(b) not a multiple of 4).
// An empty b gives an empty, non-nil slice.
func int32View(b []byte) []int32 {
	if !hostLittleEndian || len(b)%4 != 0 {
		return nil
	}
	if len(b) == 0 {
		return []int32{}
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// uint32s decodes b (little-endian) as []uint32, without copying when possible.
func uint32s(b []byte) []uint32 {
	n := len(b) / 4
	if n == 0 {
		return []uint32{}
	}
	if hostLittleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// int32Bytes returns the bytes of v in memory order (little-endian only on a little-endian host) without copying.
func int32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// appendInt32s appends v little-endian to dst.
func appendInt32s(dst []byte, v []int32) []byte {
	if hostLittleEndian && len(v) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(x))
	}
	return dst
}

// appendUint32s appends v little-endian to dst.
func appendUint32s(dst []byte, v []uint32) []byte {
	if hostLittleEndian && len(v) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, x)
	}
	return dst
}

// uint32Bytes returns the bytes of v in memory order without copying (little-endian only on a little-endian host).
func uint32Bytes(v []uint32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
