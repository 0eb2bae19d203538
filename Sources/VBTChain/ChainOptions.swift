import ArgumentParser

/// Where the chain store is, for `vbt-uplink` and `vbt chain`. TLS is verify-full whatever is given:
/// a URL naming another sslmode is refused.
public struct ChainOptions: ParsableArguments {
    @Option(help: "The chain store as a libpq URL, e.g. postgresql://hq.example.org:5432/vbt (the options below override its parts).")
    public var chainUrl: String?

    @Option(help: "The chain store's host name (it must be the name in the server's certificate), or a Unix socket folder on this computer.")
    public var chainHost: String?

    @Option(help: "The chain store's port (default 5432).")
    public var chainPort: Int?

    @Option(help: "The chain store's database (default: the user's name).")
    public var chainDbname: String?

    @Option(help: "The role to connect as: a gym's uplink is vbt_gym_<gym>, the name in its certificate.")
    public var chainUser: String?

    @Option(help: "The chain's CA certificate (PEM): the server's certificate must chain to it (sslmode verify-full).")
    public var chainSslrootcert: String?

    @Option(help: "This side's certificate (PEM), signed by the chain's CA; `vbt chain add-gym` makes a gym's.")
    public var chainSslcert: String?

    @Option(help: "This side's private key (PEM, readable by its owner only).")
    public var chainSslkey: String?

    public init() {}

    public func validate() throws {
        if let chainPort { guard (1...65_535).contains(chainPort) else { throw ValidationError("--chain-port must be 1 to 65535") } }
        guard chainUrl != nil || chainHost != nil else {
            throw ValidationError("say where the chain store is: --chain-url or --chain-host")
        }
        if let chainUrl { do { try ChainEndpoint.refuseWeakSSL(in: chainUrl) } catch { throw ValidationError("\(error)") } }
    }

    /// The endpoint these options name.
    public func endpoint(applicationName: String) -> ChainEndpoint {
        var endpoint = ChainEndpoint()
        endpoint.url = chainUrl
        endpoint.host = chainHost
        endpoint.port = chainPort
        endpoint.dbname = chainDbname
        endpoint.user = chainUser
        endpoint.sslRootCert = chainSslrootcert
        endpoint.sslCert = chainSslcert
        endpoint.sslKey = chainSslkey
        endpoint.applicationName = applicationName
        return endpoint
    }
}
