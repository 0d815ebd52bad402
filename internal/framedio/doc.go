// Package framedio reads and writes compressed files made of independent
// frames, so that one large compressed input is decompressed on several
// cores instead of one.
//
// Two layouts are recognised, both standard and both readable by every
// ordinary decoder (zstd, gzip, zcat):
//
//   - zstd files of several frames, each frame stating its content size
//     (what pzstd, `gload compress` and most chunked writers produce);
//   - BGZF gzip files: a sequence of gzip members, each ≤ 64 KiB, whose
//     header carries the member's compressed size in a "BC" extra field
//     (what `bgzip` from htslib and `gload compress --codec bgzf` produce).
//
// [Open] walks a file's frame headers (never its compressed payload) and
// decodes groups of frames on [Options.Decoders] goroutines, handing the
// output back in file order, byte-identical to a serial decoder's. A file
// whose first frame gives no way to find the next one without decoding it
// (one gzip member without BGZF sizes, a zstd frame of unknown or large
// content size) is reported as not splittable, and the caller decodes it as
// one stream; such a frame met later in a splittable file is decoded in
// order on the reading goroutine while later frames are decoded ahead.
//
// Memory is bounded by [Options.BudgetBytes] of decoded output in flight.
// Errors name the codec and the byte offset of the frame they were found in.
//
// The package knows nothing of records, lines or tokenizers: bytes in,
// bytes out.
package framedio
