"""The agent and its tools: the loop a model drives (``loop``), the one set of tools over a bundle (``tools``) and
the MCP server that serves them to other agents (``mcp_server``)."""
