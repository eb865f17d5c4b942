// The Relay module: binds protocol methods to config, auth and transport.
