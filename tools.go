//go:build tools

// Package tools pins modules used only by optional builds (the hftokenizers backend) so `go mod tidy` keeps them.
package tools

import _ "github.com/daulet/tokenizers"
