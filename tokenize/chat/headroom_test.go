package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize/chat/jinja"
)

// TestSandboxHeadroom renders every fixture conversation with every fixture template (all the renders the segment
// rule makes) and checks that the most any render used of each budget is far below the default limits: at least
// 100× for one conversation of the fixtures and 10× for a 100 000-turn conversation (4.5 MB) with every template.
func TestSandboxHeadroom(t *testing.T) {
	recs := fixtures.ChatRecords(t)
	lim := jinja.DefaultLimits
	for _, ft := range fixtures.ChatTemplates {
		tmpl, err := LoadTemplate(fixtures.Path(t, ft.Config...), "", "")
		if err != nil {
			t.Fatal(err)
		}
		var most jinja.Usage
		var out int
		for _, r := range recs {
			var rec map[string]json.RawMessage
			if err := json.Unmarshal(r.Raw, &rec); err != nil {
				t.Fatal(err)
			}
			m, ok := rec["messages"]
			if !ok {
				continue
			}
			msgs, err := messageList(m, "messages")
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= len(msgs); n++ {
				for _, gen := range []bool{false, true} {
					var u jinja.Usage
					s, _ := tmpl.render(msgs[:n], jinja.Undefined(), gen, time.Now(), &u)
					most = maxUsage(most, u)
					out = max(out, len(s))
				}
			}
		}
		t.Logf("%s, fixture conversations: most %+v, longest rendering %d bytes", ft.Name, most, out)
		checkHeadroom(t, ft.Name, most, out, 0, lim, 100)

		// One long conversation: 100 000 turns, 45 bytes each.
		msgs := make([]jinja.Value, 100_000)
		for i := range msgs {
			role := []string{"user", "assistant"}[i%2]
			msgs[i] = mustValue(t, fmt.Sprintf(`{"role": %q, "content": %q}`, role, strings.Repeat("word ", 8)+fmt.Sprint(i)))
		}
		var u jinja.Usage
		s, err := tmpl.render(msgs, jinja.Undefined(), false, time.Now(), &u)
		t.Logf("%s, 100k turns: %+v, rendering %d bytes, err %v", ft.Name, u, len(s), err)
		if _, ok := err.(*jinja.LimitError); ok {
			t.Errorf("%s: 100k turns: %v", ft.Name, err)
		}
		checkHeadroom(t, ft.Name+" 100k turns", u, len(s), int64(len(msgs))*(64+45), lim, 10)
	}
}

func maxUsage(a, b jinja.Usage) jinja.Usage {
	return jinja.Usage{Steps: max(a.Steps, b.Steps), Depth: max(a.Depth, b.Depth), MaxItems: max(a.MaxItems, b.MaxItems), AllocBytes: max(a.AllocBytes, b.AllocBytes)}
}

func checkHeadroom(t *testing.T, name string, u jinja.Usage, out int, inBytes int64, lim jinja.Limits, factor int64) {
	t.Helper()
	for _, c := range []struct {
		what      string
		used, max int64
		factor    int64
	}{
		{"steps", u.Steps, lim.MaxSteps + StepsPerByte*inBytes, factor},
		{"depth", int64(u.Depth), int64(lim.MaxDepth), 20}, // Python's own recursion limit (1000 frames) is near
		{"items", int64(u.MaxItems), int64(lim.MaxItems), factor},
		{"alloc", u.AllocBytes, lim.MaxAllocBytes, factor},
		{"output", int64(out), int64(lim.MaxOutputBytes), factor},
	} {
		if c.used*c.factor > c.max {
			t.Errorf("%s: %s used %d, limit %d: less than %d× headroom", name, c.what, c.used, c.max, c.factor)
		}
	}
}
