import Logging
import Synchronization
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// A BLE sensor as a bridge source: scan, connect, exchange MTU, discover,
/// subscribe, configure, stream; on any loss, report and start over (every
/// reconnect redoes MTU, discovery and subscription: the peripheral forgets
/// its CCCD on disconnect).
public struct BLESource: SensorSource {
    public let spec: BLESensorSpec
    public let adapter: Int
    public let station: String
    public var reconnect = ReconnectPolicy()
    /// Seconds without a notification before the link counts as stalled.
    public var stallTimeoutS = 2.0
    /// Seconds between `streaming` status messages.
    public var statusIntervalS = 5.0
    /// Seconds between battery polls (WitMotion).
    public var batteryIntervalS = 30.0

    public var name: String { "ble:\(spec.kind.rawValue)" }

    /// Creates the source.
    public init(spec: BLESensorSpec, adapter: Int, station: String) {
        (self.spec, self.adapter, self.station) = (spec, adapter, station)
    }

    private func status(_ state: StatusMessage.State, device: String, rateHz: Double? = nil, batteryPct: Double? = nil, reason: String? = nil) -> BridgeEvent {
        .status(station: station, StatusMessage(state: state, sensor: spec.sensor, device: device, rateHz: rateHz, batteryPct: batteryPct, reason: reason))
    }

    private var wanted: String {
        switch spec.filter {
        case .address(let address): address.description
        case .namePrefix(let prefix): "\(prefix)*"
        case .nameContains(let fragment): "*\(fragment)*"
        }
    }

    public func run(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        var failures = 0
        while !stop.isSet {
            var device = wanted
            queue.push(status(.connecting, device: device))
            do {
                let (connection, found) = try adapterLock.withLock { _ throws(SensorError) -> (ATTConnection, Advertisement) in
                    try BLEAdapter.prepare(adapter)
                    guard let found = try BLEAdapter.scan(adapter: adapter, for: spec, timeoutS: 10, stop: stop) else {
                        throw SensorError("Sensor not found: make sure it is on and nearby (looking for \(wanted) on hci\(adapter))")
                    }
                    return (try ATTConnection(peer: found.address, timeoutS: 10), found)
                }
                device = found.address.description
                logger.info("ble sensor found", metadata: ["device": "\(device)", "name": "\(found.name ?? "")", "rssi": "\(found.rssi)"])
                try stream(
                    connection, device: device, into: queue, stop: stop, logger: logger,
                    onSubscribed: {
                        failures = 0
                    })
                queue.push(status(.disconnected, device: device, reason: "stopped"))
            } catch {
                failures += 1
                queue.push(status(.disconnected, device: device, reason: error.message))
                stop.sleep(reconnect.delay(afterFailures: failures))
            }
        }
    }

    private func stream(
        _ connection: ATTConnection, device: String, into queue: EventQueue, stop: StopFlag, logger: Logger,
        onSubscribed: () -> Void
    ) throws(SensorError) {
        let mtu = try connection.exchangeMTU(247)
        let services = try connection.primaryServices()
        let serviceUUID = spec.kind == .witmotion ? WitMotion.serviceUUID : PostureWearable.serviceUUID
        guard let service = services.first(where: { $0.uuid == serviceUUID }) else {
            throw SensorError("Cannot connect: \(device) has no \(spec.kind.rawValue) service (\(serviceUUID)); is it the right sensor?")
        }
        let characteristics = try connection.characteristics(start: service.start, end: service.end)
        let notifyUUID = spec.kind == .witmotion ? WitMotion.notifyUUID : PostureWearable.notifyUUID
        guard let notify = characteristics.first(where: { $0.uuid == notifyUUID }) ?? characteristics.first(where: \.canNotify),
            let notifyIndex = characteristics.firstIndex(of: notify)
        else {
            throw SensorError("Cannot connect: \(device) has no notify characteristic; restart the sensor and retry")
        }
        // Handles come from the peripheral: no arithmetic that can trap on 0 or 0xFFFF.
        let nextDeclaration = notifyIndex + 1 < characteristics.count ? characteristics[notifyIndex + 1].declarationHandle : nil
        let descriptorsEnd = nextDeclaration.map { $0 > 0 ? $0 - 1 : 0 } ?? service.end
        let (descriptorsStart, overflow) = notify.valueHandle.addingReportingOverflow(1)
        guard !overflow, let cccd = try connection.cccd(start: descriptorsStart, end: descriptorsEnd),
            try connection.write(handle: cccd, [0x01, 0x00])
        else {
            throw SensorError("Cannot connect: \(device) refused notifications; restart the sensor and retry")
        }
        let commandHandle = characteristics.first(where: { $0.uuid == WitMotion.writeUUID })?.valueHandle
        let shortened = BLEAdapter.shortenConnectionInterval(
            adapter: adapter, connectionHandle: connection.connectionHandle, rateHz: spec.kind == .witmotion ? spec.rateHz : 20)
        logger.info(
            "ble sensor subscribed",
            metadata: [
                "device": "\(device)", "mtu": "\(mtu)", "notify.handle": "\(notify.valueHandle)",
                "interval.shortened": "\(shortened)",
            ])
        onSubscribed()

        // Readings come in bursts (several notifications a connection event); the stream's clock
        // spreads them by the sensor's rate.
        var witmotion = WitMotionStream(rateHz: Double(spec.rateHz))
        var posture = PostureLineDecoder()
        var rate = RateEstimator()
        var stamper = MonotonicStamper()
        var battery: Double?
        var confirmedRate: Int?
        if spec.kind == .witmotion, let commandHandle {
            try configureRate(connection, handle: commandHandle, stop: stop)
            try connection.writeCommand(handle: commandHandle, WitMotion.readRegister(WitMotion.rateRegister))
        }
        queue.push(status(.connected, device: device))
        var lastNotification = monotonicSeconds()
        var nextStatus = monotonicSeconds() + 1
        var nextBattery = monotonicSeconds() + 0.5
        while !stop.isSet {
            let now = monotonicSeconds()
            if now >= nextStatus {
                nextStatus = now + statusIntervalS
                queue.push(status(.streaming, device: device, rateHz: rate.rateHz(now: wallClockSeconds()) ?? 0, batteryPct: battery))
            }
            if spec.kind == .witmotion, let commandHandle, now >= nextBattery {
                nextBattery = now + batteryIntervalS
                try connection.writeCommand(handle: commandHandle, WitMotion.readRegister(WitMotion.batteryRegister))
            }
            guard let (handle, value) = try connection.nextNotification(timeoutS: 0.1) else {
                if monotonicSeconds() - lastNotification > stallTimeoutS {
                    throw SensorError("Sensor stopped sending for \(Int(stallTimeoutS)) s: reconnecting")
                }
                continue
            }
            lastNotification = monotonicSeconds()
            guard handle == notify.valueHandle else { continue }
            let t = wallClockSeconds()
            switch spec.kind {
            case .witmotion:
                // The rest of the burst: whatever came with this notification.
                var burst = [value]
                var lost: SensorError?
                do {
                    while let (more, moreValue) = try connection.nextNotification(timeoutS: 0) {
                        if more == notify.valueHandle { burst.append(moreValue) }
                    }
                } catch {
                    lost = error  // what came before the loss is still published
                }
                let (readings, other) = witmotion.feed(burst, arrivalS: t)
                for reading in readings { rate.add(reading.t) }
                for frame in other {
                    switch frame {
                    case .registers(let start, let values) where start == WitMotion.rateRegister:
                        confirmedRate = WitMotion.rate(forCode: UInt8(truncatingIfNeeded: values[0]))
                        // A sensor that kept another rate: its readings are that far apart.
                        if let confirmedRate { witmotion.clock.nominalPeriodS = 1 / Double(confirmedRate) }
                        logger.info(
                            "ble sensor output rate read back",
                            metadata: [
                                "device": "\(device)", "asked_hz": "\(spec.rateHz)",
                                "reported_hz": "\(confirmedRate.map(String.init) ?? "unknown code \(values[0])")",
                            ])
                    case .registers(let start, let values) where start == WitMotion.batteryRegister:
                        battery = WitMotion.batteryPercent(centivolts: Int(values[0]))
                    default:
                        break
                    }
                }
                if !readings.isEmpty { queue.push(.readings(station: station, device: device, .imu(readings))) }
                if let lost { throw lost }
            case .posture:
                let readings = posture.feed(value).map { reading -> SampleMessage.PostureReading in
                    let stamped = stamper.stamp(t)
                    rate.add(stamped)
                    return .init(t: stamped, acc: reading.acc, mag: reading.mag)
                }
                if !readings.isEmpty { queue.push(.readings(station: station, device: device, .posture(readings))) }
            }
        }
    }

    /// Unlock, set the output rate, save (WitMotion's own sequence, 100 ms apart).
    private func configureRate(_ connection: ATTConnection, handle: UInt16, stop: StopFlag) throws(SensorError) {
        guard let code = WitMotion.rateCodes[spec.rateHz] else { return }
        for command in [WitMotion.unlock, WitMotion.setRate(code: code), WitMotion.save] {
            try connection.writeCommand(handle: handle, command)
            stop.sleep(0.1)
        }
    }
}
