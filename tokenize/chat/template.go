package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gload/gload/tokenize/chat/jinja"

	"github.com/gload/gload/tokenize"
)

// Template is a compiled chat template with the variables tokenizer_config.json gives it (bos_token, eos_token and
// the other special-token strings). Safe for concurrent use.
type Template struct {
	Name     string // where it came from: "tokenizer_config.json", "tokenizer_config.json[tool_use]", "FILE.jinja"
	Source   string
	BOS, EOS string // "" when the config has none
	// Limits are the sandbox's budgets for each render (zero value: jinja.DefaultLimits). Set before use.
	Limits jinja.Limits
	vars   map[string]jinja.Value
	tmpl   *jinja.Template
	// renders counts whole-conversation renders (prefix tails not counted), for tests of linear rendering.
	renders atomic.Int64
}

// LoadTemplate reads a chat template: a tokenizer_config.json (plain or gzip'd; its "chat_template" a string or the
// list-of-named-templates form, of which "default" is taken unless name picks another), or a .jinja file holding
// the template itself. configPath, when not "", supplies bos_token/eos_token for a .jinja template.
func LoadTemplate(path, name, configPath string) (*Template, error) {
	raw, err := tokenize.ReadConfigFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".jinja") || strings.HasSuffix(path, ".j2") || !looksJSON(raw) {
		t := &Template{Name: filepath.Base(path), Source: string(raw), vars: map[string]jinja.Value{}}
		if configPath != "" {
			cfgRaw, err := tokenize.ReadConfigFile(configPath)
			if err != nil {
				return nil, err
			}
			if err := t.setVars(cfgRaw, configPath); err != nil {
				return nil, err
			}
		}
		return t, t.compile()
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	t := &Template{Name: filepath.Base(path), vars: map[string]jinja.Value{}}
	switch {
	case len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null":
		return nil, fmt.Errorf("%s: no \"chat_template\" (pass --chat-template FILE.jinja)", path)
	case cfg.ChatTemplate[0] == '"':
		if err := json.Unmarshal(cfg.ChatTemplate, &t.Source); err != nil {
			return nil, fmt.Errorf("%s: chat_template: %v", path, err)
		}
	case cfg.ChatTemplate[0] == '[':
		var list []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(cfg.ChatTemplate, &list); err != nil {
			return nil, fmt.Errorf("%s: chat_template: %v", path, err)
		}
		if name == "" {
			name = "default"
		}
		var have []string
		for _, e := range list {
			have = append(have, e.Name)
			if e.Name == name {
				t.Source = e.Template
				t.Name = fmt.Sprintf("%s[%s]", t.Name, name)
			}
		}
		if t.Source == "" {
			return nil, fmt.Errorf("%s: chat_template has no template named %q (have %v)", path, name, have)
		}
	default:
		return nil, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}", path)
	}
	if err := t.setVars(raw, path); err != nil {
		return nil, err
	}
	return t, t.compile()
}

// NewTemplate compiles source with the given bos/eos strings ("" for none).
func NewTemplate(name, source, bos, eos string) (*Template, error) {
	t := &Template{Name: name, Source: source, BOS: bos, EOS: eos, vars: map[string]jinja.Value{}}
	if bos != "" {
		t.vars["bos_token"] = jinja.NewString(bos)
	}
	if eos != "" {
		t.vars["eos_token"] = jinja.NewString(eos)
	}
	return t, t.compile()
}

func looksJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// setVars takes the special-token strings of a tokenizer_config.json (string or {"content": ...} form), as
// transformers passes them to the template.
func (t *Template) setVars(raw []byte, path string) error {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for key, v := range cfg {
		if !strings.HasSuffix(key, "_token") {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			var obj struct {
				Content *string `json:"content"`
			}
			if json.Unmarshal(v, &obj) != nil || obj.Content == nil {
				continue
			}
			s = *obj.Content
		}
		t.vars[key] = jinja.NewString(s)
		switch key {
		case "bos_token":
			t.BOS = s
		case "eos_token":
			t.EOS = s
		}
	}
	return nil
}

func (t *Template) compile() error {
	tm, err := jinja.Compile(t.Source)
	if err != nil {
		return fmt.Errorf("chat template %s: %v", t.Name, err)
	}
	t.tmpl = tm
	return nil
}

// StepsPerByte is the steps budget a render gets per byte of message content (and per 64 bytes per message), on
// top of Limits.MaxSteps.
const StepsPerByte = 20

// Render renders messages (and tools, if not nil) with add_generation_prompt as asked, in the sandbox; now is what
// strftime_now() formats (the zero time: the wall clock, as transformers does). A template error is a
// *jinja.LimitError (a sandbox budget ran out) or an error worded as Jinja2's; Render never panics.
func (t *Template) Render(messages []jinja.Value, tools jinja.Value, addGenerationPrompt bool, now time.Time) (string, error) {
	return t.render(messages, tools, addGenerationPrompt, now, nil)
}

func (t *Template) render(messages []jinja.Value, tools jinja.Value, addGenerationPrompt bool, now time.Time, usage *jinja.Usage) (string, error) {
	data, o := t.setup(messages, tools, addGenerationPrompt, now, usage)
	t.renders.Add(1)
	return t.tmpl.RenderWith(data, o)
}

// renderTracked renders messages without the generation prompt, as render does, and returns with it a
// *jinja.Prefixes for the prefixes' renderings (nil if the template's shape does not allow it).
func (t *Template) renderTracked(messages []jinja.Value, tools jinja.Value, now time.Time) (string, *jinja.Prefixes, error) {
	data, o := t.setup(messages, tools, false, now, nil)
	t.renders.Add(1)
	return t.tmpl.RenderTracked(data, "messages", "add_generation_prompt", o)
}

func (t *Template) setup(messages []jinja.Value, tools jinja.Value, addGenerationPrompt bool, now time.Time, usage *jinja.Usage) (map[string]jinja.Value, jinja.RenderOptions) {
	data := make(map[string]jinja.Value, len(t.vars)+4)
	for k, v := range t.vars {
		data[k] = v
	}
	data["messages"] = jinja.NewList(messages)
	data["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)
	if !tools.IsUndefined() {
		data["tools"] = tools
	}
	lim := t.Limits
	if lim == (jinja.Limits{}) {
		lim = jinja.DefaultLimits
	}
	// The steps budget grows with the conversation: the fixture templates take at most 2 steps per byte of content
	// (TestSandboxHeadroom), so 20 per byte (plus 64 bytes a message) leaves 10× headroom at any length.
	n := int64(0)
	for _, m := range messages {
		n += 64
		if m.IsDict() {
			if c, ok := m.AsDict().Get("content"); ok && c.IsString() {
				n += int64(len(c.AsString()))
			}
		}
	}
	lim.MaxSteps += StepsPerByte * n
	return data, jinja.RenderOptions{Limits: lim, Now: now, Usage: usage}
}
