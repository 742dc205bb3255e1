"""Engine adapters: the native loop, Claude Code and Codex. They may import ``condensate``;
the core never imports them."""
