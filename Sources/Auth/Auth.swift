// The Auth module: token manager, providers, stores.
