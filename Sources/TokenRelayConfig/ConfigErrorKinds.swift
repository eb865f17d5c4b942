import TokenRelayErrorKinds

// Every error of the configuration layer is the configuration's fault: wire kind `config`.

extension SecretError: KindedError {
    /// A secret that cannot be resolved is a configuration problem.
    public var errorKind: ErrorKind { .config }
}

extension SecretCommandError: KindedError {
    /// A secret command that cannot run or fails is a configuration problem.
    public var errorKind: ErrorKind { .config }
}

extension YAMLError: KindedError {
    /// A file that is not valid YAML is a configuration problem.
    public var errorKind: ErrorKind { .config }
}

extension FileSystemError: KindedError {
    /// A configuration file (or secret file) that cannot be read is a configuration problem.
    public var errorKind: ErrorKind { .config }
}
