//go:build hftokenizers

package tokenize_test

import _ "github.com/gload/gload/tokenize/hfengine" // registers engine "hf"

func init() { parityEngines = append(parityEngines, "hf") }
