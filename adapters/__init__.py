"""Engine adapters: the native loop (``native``), Claude Code (``claude_code``) and Codex
(``codex``), each a package that declares its ``EngineInfo`` as ``ENGINE`` and registers it
under the ``condensate.engine.registry`` entry-point group (``pyproject.toml``). They may import
``condensate``; the core never imports them, and finds them through ``condensate.engine.registry``.
The modules here beside them are what the CLI engines share."""
