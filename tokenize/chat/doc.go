// Package chat turns chat conversations into input_ids and assistant-only labels, by the rules of
// shared/fixtures/chat/README.md: the model's chat template rendered as transformers renders it (Jinja2 with
// trim_blocks, lstrip_blocks, loop controls, raise_exception, strftime_now), tokenized with tokenizer.json without
// special tokens, and labels that keep input_ids only for tokens whose start offset lies in an assistant segment.
//
// It holds the template loading (tokenizer_config.json or a .jinja file), the JSON-to-Jinja value conversion
// (key order kept, as Python dicts keep it), the segment rule and the record shapes (messages, TRL prompt/completion
// lists, plain prompt/completion strings). It does not read corpora or write datasets: the tokenize pipeline feeds
// it records and stores what it returns.
package chat
