"""The README's host configurations parse, and none of them carries a literal token."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Pointing an MCP host at it", 1)[1].split("\n## ", 1)[0]


def test_every_host_configuration_parses_and_takes_the_token_from_a_secret_store_or_environment() -> None:
    section = _section()
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.DOTALL)]
    assert len(blocks) == 3  # Claude Desktop, Cursor, VS Code
    tokens = []
    for block in blocks:
        for server in (block.get("mcpServers") or block["servers"]).values():
            assert server["env"]["LUCY_MEMORY_BASE_URL"].startswith("https://")
            tokens.append(server["env"].get("LUCY_MEMORY_TOKEN"))
            assert "lucy-memory-mcp" in server["command"] + " ".join(server.get("args", []))
    assert tokens == [None, "${env:LUCY_MEMORY_TOKEN}", "${input:lucy-memory-token}"]
    assert "security find-generic-password" in blocks[0]["mcpServers"]["lucy-memory"]["args"][1]
    assert blocks[2]["inputs"][0]["password"] is True
    claude_code = re.search(r"claude mcp add lucy-memory .*?lucy-memory-mcp", section, re.DOTALL)
    assert claude_code is not None
    assert "-e 'LUCY_MEMORY_TOKEN=${LUCY_MEMORY_TOKEN}'" in claude_code.group(0)
