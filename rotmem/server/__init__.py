"""Memory as a service: ``rotmem serve`` (HTTP, ``rotmem.server.app``) and ``rotmem mcp`` (MCP over
stdio, ``rotmem.server.mcp_server``) over ``TemporalMemory``, one namespace per tenant
(``rotmem.server.pool``), API keys stored hashed (``rotmem.server.keys``).

Nothing here is imported by ``import rotmem``; FastAPI, uvicorn and the MCP SDK come with
``pip install "rotmem[server]"``.
"""
