package bucket

// sortDesc sorts keys descending, carrying rows along, stably: equal keys keep
// their order. It is an LSD radix sort by bytes of ^key; passes whose byte is
// the same for every key are skipped. tk and tr are scratch of the same
// length as keys.
func sortDesc(keys []uint32, rows []int32, tk []uint32, tr []int32) {
	n := len(keys)
	if n < 2 {
		return
	}
	for i, k := range keys {
		keys[i] = ^k
	}
	src, srcR, dst, dstR := keys, rows, tk[:n], tr[:n]
	var count [256]int
	for shift := uint(0); shift < 32; shift += 8 {
		count = [256]int{}
		for _, k := range src {
			count[byte(k>>shift)]++
		}
		if count[byte(src[0]>>shift)] == n {
			continue
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for i, k := range src {
			d := byte(k >> shift)
			at := count[d]
			count[d]++
			dst[at], dstR[at] = k, srcR[i]
		}
		src, srcR, dst, dstR = dst, dstR, src, srcR
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
		copy(rows, srcR)
	}
	for i, k := range keys {
		keys[i] = ^k
	}
}
