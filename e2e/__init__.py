"""End-to-end tests: real processes only (the fake under uvicorn, lucy-memory-mcp over stdio)."""
