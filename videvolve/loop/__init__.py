"""What the loop's nodes share, below both the nodes and the graph.

Its settings (``Context``), its state (``State``) and its services (``Run``, built once by the driver and handed
to the nodes as LangGraph's runtime context).
"""
