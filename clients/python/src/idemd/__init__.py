"""idemd's Python client: make a side effect happen at most once per logical request.

The API's messages, compiled from the repository's protos at build time, are in
:mod:`idemd.proto`.
"""
