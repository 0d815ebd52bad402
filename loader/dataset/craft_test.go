package dataset

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// craftShard builds a gload-schema shard (input_ids only) with one record
// batch whose metadata says anything.
func craftShard(rows int64, nodes, bufs []int64, body []byte) []byte {
	var out []byte
	frame := func(meta, body []byte) {
		out = binary.LittleEndian.AppendUint32(out, continuationMarker)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
		out = append(out, meta...)
		out = append(out, body...)
	}
	frame(schemaMessage(WriterOptions{}), nil)
	frame(recordBatchMessage(rows, nodes, bufs, int64(len(body))), body)
	return append(out, eosMarker[:]...)
}

// TestCraftedBatches covers hostile metadata values a fuzzer is unlikely to
// hit: huge row counts, offsets and lengths near the int64 limits.
func TestCraftedBatches(t *testing.T) {
	body := make([]byte, 64)
	binary.LittleEndian.PutUint32(body[4:], 3) // offsets [0, 3]
	good := craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body)
	if d, err := memDataset("x", good, nil); err != nil || d.Len() != 1 || d.Length(0) != 3 {
		t.Fatalf("crafted good shard: %v", err)
	}
	const big = math.MaxInt64
	cases := map[string][]byte{
		"rows_maxint":        craftShard(big, []int64{big, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"rows_negative":      craftShard(-1, []int64{-1, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"nulls_gt_length":    craftShard(1, []int64{1, 2, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"child_maxint":       craftShard(1, []int64{1, 0, big, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"child_nulls":        craftShard(1, []int64{1, 0, 3, 1}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"buffer_off_maxint":  craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, big, 8, 8, 0, 8, 12}, body),
		"buffer_len_maxint":  craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, big, 8, 0, 8, 12}, body),
		"buffer_negative":    craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, -8, 8, 8, 0, 8, 12}, body),
		"values_short":       craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 4}, body),
		"offsets_short":      craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, 4, 8, 0, 8, 12}, body),
		"too_few_nodes":      craftShard(1, []int64{1, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, body),
		"too_many_buffers":   craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12, 0, 0}, body),
		"validity_short":     craftShard(9, []int64{9, 1, 3, 0}, []int64{0, 1, 0, 40, 8, 0, 8, 12}, body),
		"offset_past_values": craftShard(1, []int64{1, 0, 2, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 8}, body),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := memDataset("crafted.arrow", data, nil)
			if err == nil {
				t.Fatalf("accepted: %d rows", d.Len())
			}
			if !strings.Contains(err.Error(), "crafted.arrow") {
				t.Errorf("error does not name the shard: %v", err)
			}
		})
	}
	// Decreasing offsets.
	bad := make([]byte, 64)
	binary.LittleEndian.PutUint32(bad[0:], 2)
	binary.LittleEndian.PutUint32(bad[4:], 1)
	if _, err := memDataset("x", craftShard(1, []int64{1, 0, 3, 0}, []int64{0, 0, 0, 8, 8, 0, 8, 12}, bad), nil); err == nil ||
		!strings.Contains(err.Error(), "offsets decrease") {
		t.Errorf("decreasing offsets: %v", err)
	}
}
