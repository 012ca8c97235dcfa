"""Generated gRPC stubs of the agentd.v1 proto package (make sdk-python-gen; do not edit)."""
