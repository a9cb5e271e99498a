"""The analysis half of fqntrace: reading trace files offline (`python -m fqntrace <verb>`).

Never imports torch nor the capture half (the package root: hooks, compile, exit, FSDP), so it
runs where torch is not installed. The modules are also importable by their old names
(`from fqntrace import summarize`, a finder in fqntrace/__init__.py). See docs/architecture.md.
"""
