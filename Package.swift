// swift-tools-version:6.1
import PackageDescription

// Layers, bottom to top: VBTWire (the wire: JSON codec, envelope, every
// payload, topics and commands, a recording's lines; no Foundation, no sockets)
// -> C system libraries and VBTBus (sockets, publish/subscribe, counters,
// recording files) -> VBTQuery (the recorder's query protocol and its values,
// no SQLite) -> the domain modules (VBTDetection does no I/O; the others also
// hold their program's runtime) -> VBTDetectorRole (the rep-detector's process)
// -> programs. Nothing imports anything above it.
// The upcoming language features the server-side Swift packages we build on
// (Hummingbird among them) enable: existentials spelled `any`, and a file sees
// only the members of modules it imports itself.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "vbt",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "vbt-bus", targets: ["vbt-bus"]),
        .executable(name: "vbt", targets: ["vbt"]),
        .executable(name: "sensor-bridge", targets: ["sensor-bridge"]),
        .executable(name: "rep-detector", targets: ["rep-detector"]),
        .executable(name: "posture-evaluator", targets: ["posture-evaluator"]),
        .executable(name: "session-recorder", targets: ["session-recorder"]),
        .executable(name: "notifier", targets: ["notifier"]),
        .executable(name: "coach-console", targets: ["coach-console"]),
        .executable(name: "vbt-uplink", targets: ["vbt-uplink"]),
        .library(name: "VBTWire", targets: ["VBTWire"]),
        .library(name: "VBTBus", targets: ["VBTBus"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        // The notifier's webhook sink (HTTP and HTTPS POST with timeouts).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // Already under AsyncHTTPClient; named so the webhook may import NIOHTTP1 (its request types).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        // The coach console: HTTP, its WebSocket push, sessions and bcrypt password hashes,
        // and /metrics in Prometheus text format.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        // `vbt loadtest`'s latency percentiles.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // The notifier's queue of rest timers by due time (already resolved for SwiftNIO).
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
    ],
    targets: [
        // libzmq through pkg-config; `make deps` installs libzmq3-dev.
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"])]
        ),
        // BlueZ's libbluetooth (HCI, L2CAP) through pkg-config; `make deps` installs libbluetooth-dev.
        .systemLibrary(
            name: "CBlueZ",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        // zlib through pkg-config, for gzip-compressed recordings; `make deps` installs zlib1g-dev.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // libpq, PostgreSQL's client, through pkg-config, for the chain store; `make deps` installs libpq-dev.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The wire alone: what any program (or another language's port) needs to
        // read and write bus messages. Foundation-free on purpose.
        .target(name: "VBTWire"),
        .target(
            name: "VBTBus",
            dependencies: [
                "VBTWire",
                "CZeroMQ",
                "CZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The bus's forwarder and its memory budget: linked by vbt-bus alone (and by the
        // benchmark and the tests that measure and drive it), never by a consumer.
        .target(
            name: "VBTForwarder",
            dependencies: [
                "VBTWire", "VBTBus", "CZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The recorder's query protocol: query names, arguments, the values
        // replies carry, the client, charts and export files. No SQLite: only
        // the session-recorder links the store.
        .target(
            name: "VBTQuery",
            dependencies: ["VBTWire", "VBTBus"]
        ),
        // Device decoders, BLE central, serial, replay, simulator, the bridge runtime.
        .target(
            name: "VBTSensors",
            dependencies: [
                "VBTWire", "VBTBus",
                "CBlueZ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Rep detection, metrics, sets, velocity loss, profiles, learned patterns, and `vbt eval`'s
        // offline run and comparison: pure values, no I/O and no bus (`vbt` reads the recording and
        // labels files; the rep-detector's process is VBTDetectorRole).
        .target(
            name: "VBTDetection",
            dependencies: ["VBTWire", "VBTQuery"]
        ),
        // The rep-detector's role: its process (DetectorRuntime: the bus, the recorder's questions,
        // journal, checkpoints, the pattern file), its options and station selection, and the values
        // only it keeps (the hand-over's state machine, the patterns' sync).
        .target(
            name: "VBTDetectorRole",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTQuery",
                "VBTDetection",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Posture calibration (normal densities) and live evaluation.
        .target(
            name: "VBTPosture",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTQuery",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The gym's history in SQLite (GRDB): migrations, ingest, queries, the query service.
        .target(
            name: "VBTStore",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTQuery",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Rest timers, live workout (plan progress), threshold alerts, the watch board:
        // pure values driven by an injected clock; the runtime file does the bus I/O.
        .target(
            name: "VBTNotify",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTQuery",  // the one load-velocity fit (E1RMEstimator) and the recorder's readiness query
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // The notifier's webhook sink: its own task, bounded queue, timeout, retries with backoff.
        // A module of its own so only the notifier links SwiftNIO.
        .target(
            name: "VBTWebhook",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTNotify",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What every program's main shares: endpoint options, the run loop with one-line errors.
        .target(
            name: "VBTCommandLine",
            dependencies: [
                "VBTWire", "VBTBus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The coach console's pure parts: the live board a browser draws (every station's
        // state from bus messages, pushed as changes), accounts with bcrypt hashes, the
        // gym's metrics from heartbeats. The HTTP server is the program's.
        .target(
            name: "VBTConsole",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTQuery",
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The chain store on PostgreSQL (libpq): its numbered migrations, the gyms' row-level
        // security, the uplink that copies a gym's rows there. No SQLite: the uplink program
        // reads the gym's store and hands rows in.
        .target(
            name: "VBTChain",
            dependencies: [
                "CPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "VBTTesting",
            dependencies: ["VBTBus", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "vbt-bus",
            dependencies: [
                "VBTWire", "VBTBus", "VBTForwarder",
                "VBTCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "sensor-bridge",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTSensors",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "rep-detector",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTDetection",
                "VBTDetectorRole",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "posture-evaluator",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTPosture",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "session-recorder",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTQuery",
                "VBTStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "notifier",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTNotify",
                "VBTWebhook",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "vbt",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTDetection",  // `vbt eval` runs the detectors offline
                "VBTQuery",
                "VBTNotify",
                "VBTConsole",  // `vbt console user add`
                "VBTChain",  // `vbt chain init` and `vbt chain add-gym`
                .product(name: "Histogram", package: "hdrhistogram-swift"),  // `vbt loadtest`
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "coach-console",
            dependencies: [
                "VBTWire", "VBTBus",
                "VBTCommandLine",
                "VBTConsole",
                "VBTQuery",
                "VBTDetection",  // the load-velocity fit of the athlete pages' charts
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // The start-up's one rehearsal of a connection's pipeline (ConsoleServer.warmUp).
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // Byte buffers and the WebSocket close codes a removed display is sent.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            // Its script and style sheet (Assets/*.js, *.css), compiled in as strings.
            plugins: ["EmbedAssets"]
        ),
        // The console's script and style sheet are files that `make lint` checks; this build-tool
        // plugin writes them into a Swift file of `static let` strings at build time (no network,
        // no resource folder: an installed console is its binary alone).
        .plugin(name: "EmbedAssets", capability: .buildTool(), dependencies: ["embed-assets"]),
        .executableTarget(name: "embed-assets", path: "Plugins/embed-assets"),
        // A gym's uplink to the chain store: reads the recorder's SQLite read-only.
        .executableTarget(
            name: "vbt-uplink",
            dependencies: [
                "VBTBus",
                "VBTCommandLine",
                "VBTChain",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `make bench`: envelope codec and bus throughput beside raw libzmq.
        .executableTarget(
            name: "vbt-bench",
            dependencies: [
                "VBTWire", "VBTBus", "VBTForwarder", "VBTTesting", "VBTDetection", "VBTDetectorRole",
                "VBTSensors", "VBTPosture", "VBTQuery", "VBTStore", "CZeroMQ",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/vbt-bench"
        ),
        .testTarget(
            name: "VBTBusTests",
            dependencies: ["VBTWire", "VBTBus", "VBTForwarder", "VBTSensors", "VBTTesting", "CZeroMQ", "CBlueZ"]
        ),
        .testTarget(
            name: "VBTDetectionTests",
            dependencies: ["VBTDetection", "VBTDetectorRole", "VBTSensors", "VBTWire", "VBTBus", "VBTQuery", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTPostureTests",
            dependencies: ["VBTPosture", "VBTWire", "VBTBus", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTStoreTests",
            dependencies: ["VBTStore", "VBTQuery", "VBTWire", "VBTBus", "VBTTesting", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "VBTNotifyTests",
            dependencies: ["VBTNotify", "VBTConsole", "VBTPosture", "VBTWire", "VBTBus", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTConsoleTests",
            dependencies: [
                "VBTConsole", "VBTWire", "VBTBus", "VBTTesting", "VBTQuery", "VBTPosture",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "VBTQueryTests",
            dependencies: ["VBTQuery", "VBTDetection"]
        ),
        .testTarget(
            name: "VBTChainTests",
            dependencies: ["VBTChain"]
        ),
        .testTarget(
            name: "VBTSensorsTests",
            dependencies: ["VBTSensors", "VBTWire", "VBTBus", "VBTTesting"]
        ),
    ]
)

// A plugin takes no Swift settings (its tool, an executable target, does).
for target in package.targets where target.type != .system && target.type != .plugin {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
