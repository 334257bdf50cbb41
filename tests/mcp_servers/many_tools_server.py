"""An MCP server with 500 tools."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("many", log_level="WARNING")


def _make(index: int) -> None:
    def tool(value: str) -> str:
        return f"tool {index}: {value}"

    server.add_tool(tool, name=f"tool_{index:03d}", description=f"Tool number {index}.")


for i in range(500):
    _make(i)

if __name__ == "__main__":
    server.run()
