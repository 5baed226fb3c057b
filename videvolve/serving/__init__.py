"""The evolved agent from the tools people already use: an OpenAI-compatible server, an MCP server, an lmms-eval
model. All three answer through :class:`videvolve.serving.agent.VideoAgent`, which calls the library exactly as
``videvolve ask`` does.
"""
