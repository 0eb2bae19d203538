// swift-tools-version:6.1
import PackageDescription

// Layers, bottom to top: C system libraries -> VBTBus (sockets, envelope,
// publish/subscribe, counters) -> programs. Nothing imports anything above it.
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
        .library(name: "VBTBus", targets: ["VBTBus"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        // The notifier's webhook sink (HTTP and HTTPS POST with timeouts).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
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
        .target(
            name: "VBTBus",
            dependencies: [
                "CZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Device decoders, BLE central, serial, replay, simulator, the bridge runtime.
        .target(
            name: "VBTSensors",
            dependencies: [
                "VBTBus",
                "CBlueZ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Rep detection, metrics, sets, velocity loss, profiles: pure values, no I/O.
        .target(
            name: "VBTDetection",
            dependencies: [
                "VBTBus",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Posture calibration (normal densities) and live evaluation.
        .target(
            name: "VBTPosture",
            dependencies: [
                "VBTBus",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The gym's history in SQLite (GRDB): migrations, ingest, queries, exports, charts.
        .target(
            name: "VBTStore",
            dependencies: [
                "VBTBus",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Rest timers, live workout (plan progress), threshold alerts, the watch board:
        // pure values driven by an injected clock; the runtime file does the bus I/O.
        .target(
            name: "VBTNotify",
            dependencies: [
                "VBTBus",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The notifier's webhook sink: its own task, bounded queue, timeout, retries with backoff.
        // A module of its own so only the notifier links SwiftNIO.
        .target(
            name: "VBTWebhook",
            dependencies: [
                "VBTBus",
                "VBTNotify",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What every program's main shares: endpoint options, the run loop with one-line errors.
        .target(
            name: "VBTCommandLine",
            dependencies: [
                "VBTBus",
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
                "VBTBus",
                "VBTCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "sensor-bridge",
            dependencies: [
                "VBTBus",
                "VBTCommandLine",
                "VBTSensors",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "rep-detector",
            dependencies: [
                "VBTBus",
                "VBTCommandLine",
                "VBTDetection",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "posture-evaluator",
            dependencies: [
                "VBTBus",
                "VBTCommandLine",
                "VBTPosture",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "session-recorder",
            dependencies: [
                "VBTBus",
                "VBTCommandLine",
                "VBTStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "notifier",
            dependencies: [
                "VBTBus",
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
                "VBTBus",
                "VBTCommandLine",
                "VBTDetection",  // `vbt eval` runs the detectors offline
                "VBTStore",
                "VBTNotify",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `make bench`: envelope codec and bus throughput beside raw libzmq.
        .executableTarget(
            name: "vbt-bench",
            dependencies: [
                "VBTBus", "VBTTesting", "VBTDetection", "VBTSensors", "VBTPosture", "VBTStore", "CZeroMQ",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/vbt-bench"
        ),
        .testTarget(
            name: "VBTBusTests",
            dependencies: ["VBTBus", "VBTTesting", "CZeroMQ", "CBlueZ"]
        ),
        .testTarget(
            name: "VBTDetectionTests",
            dependencies: ["VBTDetection", "VBTSensors", "VBTBus", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTPostureTests",
            dependencies: ["VBTPosture", "VBTBus", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTStoreTests",
            dependencies: ["VBTStore", "VBTBus", "VBTTesting", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "VBTNotifyTests",
            dependencies: ["VBTNotify", "VBTPosture", "VBTBus", "VBTTesting"]
        ),
        .testTarget(
            name: "VBTSensorsTests",
            dependencies: ["VBTSensors", "VBTBus", "VBTTesting"]
        ),
    ]
)
