"""The evolved agent from the tools people already use.

An OpenAI-compatible server, an MCP server and an lmms-eval model all answer through
:class:`videvolve.serving.agent.VideoAgent`, which calls the library exactly as ``videvolve ask`` does.
"""
