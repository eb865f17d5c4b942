// The JSONRPC module.
