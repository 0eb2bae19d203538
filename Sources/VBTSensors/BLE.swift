import CBlueZ
import Logging
import Synchronization
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// A BLE central over BlueZ's libbluetooth and kernel sockets, without D-Bus
// or bluetoothd (BlueZ's raw HCI socket interface, lib/hci.h): LE scanning on a raw HCI socket
// (legacy and extended advertising reports), an L2CAP socket on the ATT
// fixed channel, and the handful of ATT requests a sensor needs.

/// A device address as the kernel wants it for an LE connection.
public struct BLEAddress: Hashable, Sendable, CustomStringConvertible {
    /// The six bytes, as written (most significant first).
    public var bytes: [UInt8]
    /// Random (true) or public (false) address.
    public var isRandom: Bool

    /// Parses `AA:BB:CC:DD:EE:FF`.
    public init?(_ text: String, isRandom: Bool = false) {
        let parts = text.split(separator: ":").compactMap { UInt8($0, radix: 16) }
        guard parts.count == 6, text.count == 17 else { return nil }
        bytes = parts
        self.isRandom = isRandom
    }

    init(littleEndian: some Collection<UInt8>, isRandom: Bool) {
        bytes = Array(littleEndian.reversed())
        self.isRandom = isRandom
    }

    var bdaddr: bdaddr_t {
        var address = bdaddr_t()
        let le = Array(bytes.reversed())
        address.b = (le[0], le[1], le[2], le[3], le[4], le[5])
        return address
    }

    public var description: String { bytes.map { String($0, radix: 16, uppercase: true).leftPadded(2) }.joined(separator: ":") }

    /// Same device, whatever the address type.
    public static func == (lhs: BLEAddress, rhs: BLEAddress) -> Bool { lhs.bytes == rhs.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }
}

/// Which BLE sensor to find, and how to recognise it.
public struct BLESensorSpec: Sendable, Equatable {
    /// The kinds of BLE sensor the bridge speaks.
    public enum Kind: String, Sendable { case witmotion, posture }
    /// How a device is picked from the advertisements.
    public enum Filter: Sendable, Equatable {
        case namePrefix(String)
        case nameContains(String)
        case address(BLEAddress)
    }

    public var kind: Kind
    public var filter: Filter
    /// The output rate asked of a WitMotion sensor.
    public var rateHz = 100

    /// Parses `witmotion`, `witmotion:WT901`, `posture@AA:BB:CC:DD:EE:FF`.
    public init(parsing text: String) throws(SensorError) {
        let kindText = text.prefix { $0 != ":" && $0 != "@" }
        guard let kind = Kind(rawValue: String(kindText)) else {
            throw SensorError("--ble \(text): the sensor kind must be witmotion or posture, e.g. --ble witmotion or --ble posture@AA:BB:CC:DD:EE:FF")
        }
        self.kind = kind
        let rest = text.dropFirst(kindText.count)
        if rest.hasPrefix("@") {
            guard let address = BLEAddress(String(rest.dropFirst())) else {
                throw SensorError("--ble \(text): the address must look like AA:BB:CC:DD:EE:FF")
            }
            filter = .address(address)
        } else if rest.hasPrefix(":") {
            guard rest.count > 1 else { throw SensorError("--ble \(text): give a name prefix after ':'") }
            filter = .namePrefix(String(rest.dropFirst()))
        } else {
            filter = kind == .witmotion ? .namePrefix(WitMotion.namePrefix) : .nameContains(PostureWearable.nameFragment)
        }
    }

    /// Whether an advertisement matches.
    public func matches(address: BLEAddress, name: String?) -> Bool {
        switch filter {
        case .address(let wanted): return wanted == address
        case .namePrefix(let prefix): return name?.hasPrefix(prefix) ?? false
        case .nameContains(let fragment): return name?.contains(fragment) ?? false
        }
    }

    /// The `sensor` field of what it produces.
    public var sensor: String { kind == .witmotion ? "imu" : "posture" }
}

/// The posture wearable's GATT layout (Nordic UART Service convention).
public enum PostureWearable {
    public static let serviceUUID = UUID128("6e400001-b5a3-f393-e0a9-e50e24dcca9e")!
    /// TX from the wearable's point of view: notifications come from here.
    public static let notifyUUID = UUID128("6e400003-b5a3-f393-e0a9-e50e24dcca9e")!
    /// Advertised names contain this.
    public static let nameFragment = "Arduino"
}

// MARK: - Advertising reports

/// One device seen while scanning.
public struct Advertisement: Sendable, Equatable {
    public var address: BLEAddress
    public var name: String?
    public var rssi: Int8
}

/// Parses an HCI LE Meta event's advertising reports: legacy (subevent 0x02)
/// and extended (0x0D), which some controllers send even to a legacy scan.
public func parseAdvertisingReports(_ meta: [UInt8]) -> [Advertisement] {
    guard let subevent = meta.first, meta.count >= 2 else { return [] }
    var reports: [Advertisement] = []
    var index = 2
    let count = Int(meta[1])
    for _ in 0..<count {
        switch subevent {
        case 0x02:
            // evt_type(1) addr_type(1) addr(6) len(1) data(len) rssi(1)
            guard index + 9 <= meta.count else { return reports }
            let addressType = meta[index + 1]
            let address = BLEAddress(littleEndian: meta[(index + 2)..<(index + 8)], isRandom: addressType & 1 == 1)
            let length = Int(meta[index + 8])
            guard index + 9 + length + 1 <= meta.count else { return reports }
            let data = Array(meta[(index + 9)..<(index + 9 + length)])
            let rssi = Int8(bitPattern: meta[index + 9 + length])
            reports.append(Advertisement(address: address, name: advertisedName(data), rssi: rssi))
            index += 10 + length
        case 0x0D:
            // evt_type(2) addr_type(1) addr(6) phy1 phy2 sid tx_power rssi interval(2) direct_type direct_addr(6) len(1) data
            guard index + 24 <= meta.count else { return reports }
            let addressType = meta[index + 2]
            let address = BLEAddress(littleEndian: meta[(index + 3)..<(index + 9)], isRandom: addressType & 1 == 1)
            let rssi = Int8(bitPattern: meta[index + 13])
            let length = Int(meta[index + 23])
            guard index + 24 + length <= meta.count else { return reports }
            let data = Array(meta[(index + 24)..<(index + 24 + length)])
            reports.append(Advertisement(address: address, name: advertisedName(data), rssi: rssi))
            index += 24 + length
        default:
            return reports
        }
    }
    return reports
}

/// The complete (0x09) or short (0x08) local name in advertising data.
public func advertisedName(_ data: [UInt8]) -> String? {
    var index = 0
    var short: String?
    while index < data.count {
        let length = Int(data[index])
        guard length > 0, index + 1 + length <= data.count else { break }
        let type = data[index + 1]
        let value = data[(index + 2)..<(index + 1 + length)]
        if type == 0x09 { return String(decoding: value, as: UTF8.self) }
        if type == 0x08 { short = String(decoding: value, as: UTF8.self) }
        index += 1 + length
    }
    return short
}

// MARK: - Adapter and scanning

/// One scan or connection set-up at a time per process: two at once on one
/// adapter make the controller refuse ("command disallowed").
let adapterLock = Mutex<Void>(())

/// The HCI adapter: checked, brought up, and used for LE scans.
public enum BLEAdapter {
    /// Checks the adapter exists and is up (bringing it up if allowed).
    public static func prepare(_ adapter: Int) throws(SensorError) {
        let ctl = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard ctl >= 0 else {
            if errno == EAFNOSUPPORT {
                throw SensorError("Bluetooth adapter not found: this system's kernel has no Bluetooth support; use a kernel with Bluetooth, or a serial sensor")
            }
            throw SensorError("Bluetooth adapter not found: \(String(cString: strerror(errno)))")
        }
        defer { close(ctl) }
        var info = hci_dev_info()
        guard cbluez_dev_info(ctl, Int32(adapter), &info) == 0 else {
            throw SensorError("Bluetooth adapter not found: no hci\(adapter); plug in a Bluetooth adapter or check `hciconfig -a`")
        }
        if cbluez_dev_is_up(&info) == 0 {
            if cbluez_dev_up(ctl, Int32(adapter)) != 0 && errno != EALREADY {
                if errno == EPERM || errno == EACCES {
                    throw SensorError("Bluetooth adapter hci\(adapter) is off: run `sudo hciconfig hci\(adapter) up`, or give sensor-bridge CAP_NET_ADMIN")
                }
                if errno == ERFKILL {
                    throw SensorError("Bluetooth adapter hci\(adapter) is blocked by rfkill: run `rfkill unblock bluetooth`")
                }
                throw SensorError("Bluetooth adapter hci\(adapter) cannot be switched on: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Scans until an advertisement matches `spec`, or `timeoutS` passes.
    public static func scan(adapter: Int, for spec: BLESensorSpec, timeoutS: Double, stop: StopFlag) throws(SensorError) -> Advertisement? {
        let dd = hci_open_dev(Int32(adapter))
        guard dd >= 0 else { throw SensorError("Bluetooth adapter not found: hci\(adapter) cannot be opened (\(String(cString: strerror(errno))))") }
        defer { hci_close_dev(dd) }
        // A scan left enabled (by a crashed run) makes the parameters command fail: stop it first.
        _ = hci_le_set_scan_enable(dd, 0x00, 0x00, 1000)
        guard hci_le_set_scan_parameters(dd, 0x01, 0x0010, 0x0010, 0x00, 0x00, 1000) >= 0 else {
            if errno == EPERM || errno == EACCES {
                throw SensorError("Bluetooth scan not permitted: run sensor-bridge as root or give it CAP_NET_RAW and CAP_NET_ADMIN")
            }
            throw SensorError("Bluetooth scan failed to start: \(String(cString: strerror(errno))); is bluetoothd running? stop it (systemctl stop bluetooth)")
        }
        guard hci_le_set_scan_enable(dd, 0x01, 0x00, 1000) >= 0 else {
            throw SensorError("Bluetooth scan failed to start: \(String(cString: strerror(errno)))")
        }
        defer { _ = hci_le_set_scan_enable(dd, 0x00, 0x00, 1000) }

        var oldFilter = hci_filter()
        var oldLength = socklen_t(MemoryLayout<hci_filter>.size)
        getsockopt(dd, SOL_HCI, HCI_FILTER, &oldFilter, &oldLength)
        var filter = hci_filter()
        hci_filter_clear(&filter)
        hci_filter_set_ptype(HCI_EVENT_PKT, &filter)
        hci_filter_set_event(EVT_LE_META_EVENT, &filter)
        setsockopt(dd, SOL_HCI, HCI_FILTER, &filter, socklen_t(MemoryLayout<hci_filter>.size))
        defer { setsockopt(dd, SOL_HCI, HCI_FILTER, &oldFilter, oldLength) }

        var names: [BLEAddress: String] = [:]
        let deadline = monotonicSeconds() + timeoutS
        var buffer = [UInt8](repeating: 0, count: Int(HCI_MAX_EVENT_SIZE))
        while !stop.isSet, monotonicSeconds() < deadline {
            var item = pollfd(fd: dd, events: Int16(POLLIN), revents: 0)
            guard poll(&item, 1, 200) > 0 else { continue }
            let count = read(dd, &buffer, buffer.count)
            // packet type(1), event code(1), length(1), then the LE meta event.
            guard count > 3, buffer[0] == UInt8(HCI_EVENT_PKT), buffer[1] == UInt8(EVT_LE_META_EVENT) else { continue }
            for report in parseAdvertisingReports(Array(buffer[3..<count])) {
                // Names may come in the scan response only: remember them per address.
                if let name = report.name { names[report.address] = name }
                var seen = report
                seen.name = names[report.address]
                if spec.matches(address: seen.address, name: seen.name) { return seen }
            }
        }
        return nil
    }

    /// Asks for a connection interval that fits `rateHz` notifications a second
    /// (the kernel's default of 30-50 ms is too slow for 100-200 Hz): 7.5-15 ms
    /// from 100 Hz up, 15-30 ms below; 1 s supervision timeout.
    public static func shortenConnectionInterval(adapter: Int, connectionHandle: UInt16, rateHz: Int) -> Bool {
        let dd = hci_open_dev(Int32(adapter))
        guard dd >= 0 else { return false }
        defer { hci_close_dev(dd) }
        let (minimum, maximum): (UInt16, UInt16) = rateHz >= 100 ? (6, 12) : (12, 24)  // units of 1.25 ms
        return hci_le_conn_update(dd, connectionHandle, minimum, maximum, 0, 100, 2000) >= 0
    }
}

// MARK: - ATT over L2CAP

/// An attribute found by discovery.
public struct GATTCharacteristic: Sendable, Equatable {
    public var declarationHandle: UInt16
    public var properties: UInt8
    public var valueHandle: UInt16
    public var uuid: UUID128
    /// Notify property bit.
    public var canNotify: Bool { properties & 0x10 != 0 }
}

/// An ATT bearer on the LE fixed channel 4, one request at a time.
public final class ATTConnection {
    private let fd: Int32
    /// The negotiated MTU.
    public private(set) var mtu = 23
    private var queued: [(handle: UInt16, value: [UInt8])] = []
    private var lost: SensorError?
    /// The HCI connection handle (for the connection-interval update).
    public private(set) var connectionHandle: UInt16 = 0
    /// Seconds a request may wait for its response.
    public var requestTimeoutS = 5.0

    /// ATT opcodes used here (Bluetooth Core, Vol 3, Part F, 3.4.8).
    enum Op {
        static let error: UInt8 = 0x01, mtuRequest: UInt8 = 0x02, mtuResponse: UInt8 = 0x03
        static let findInfoRequest: UInt8 = 0x04, findInfoResponse: UInt8 = 0x05
        static let readByTypeRequest: UInt8 = 0x08, readByTypeResponse: UInt8 = 0x09
        static let readByGroupRequest: UInt8 = 0x10, readByGroupResponse: UInt8 = 0x11
        static let writeRequest: UInt8 = 0x12, writeResponse: UInt8 = 0x13, writeCommand: UInt8 = 0x52
        static let notification: UInt8 = 0x1B, indication: UInt8 = 0x1D, confirmation: UInt8 = 0x1E
    }

    /// Connects to `peer`; the kernel does the LE connection itself.
    public init(peer: BLEAddress, timeoutS: Double) throws(SensorError) {
        fd = socket(AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_L2CAP)
        guard fd >= 0 else { throw SensorError("Bluetooth adapter not found: \(String(cString: strerror(errno)))") }
        // On failure deinit closes the socket (every property is set by now).
        try connect(peer: peer, timeoutS: timeoutS)
    }

    deinit { close(fd) }

    private func connect(peer: BLEAddress, timeoutS: Double) throws(SensorError) {
        var local = sockaddr_l2()
        local.l2_family = sa_family_t(AF_BLUETOOTH)
        local.l2_cid = 4  // ATT (little-endian host)
        local.l2_bdaddr_type = UInt8(BDADDR_LE_PUBLIC)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_l2>.size)) }
        }
        guard bound == 0 else { throw SensorError("Cannot connect: Bluetooth socket bind failed (\(String(cString: strerror(errno))))") }
        var security = bt_security(level: UInt8(BT_SECURITY_LOW), key_size: 0)
        setsockopt(fd, SOL_BLUETOOTH, BT_SECURITY, &security, socklen_t(MemoryLayout<bt_security>.size))

        var remote = sockaddr_l2()
        remote.l2_family = sa_family_t(AF_BLUETOOTH)
        remote.l2_cid = 4
        remote.l2_bdaddr = peer.bdaddr
        remote.l2_bdaddr_type = UInt8(peer.isRandom ? BDADDR_LE_RANDOM : BDADDR_LE_PUBLIC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let started = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_l2>.size)) }
        }
        if started != 0 && errno != EINPROGRESS && errno != EAGAIN {
            throw SensorError("Cannot connect: restart the sensor and retry (\(String(cString: strerror(errno))))")
        }
        var item = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&item, 1, Int32(timeoutS * 1000)) > 0 else {
            throw SensorError("Cannot connect: restart the sensor and retry (no answer in \(Int(timeoutS)) s)")
        }
        var failure: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
        guard failure == 0 else {
            throw SensorError("Cannot connect: restart the sensor and retry (\(String(cString: strerror(failure))))")
        }
        var info = l2cap_conninfo()
        var infoLength = socklen_t(MemoryLayout<l2cap_conninfo>.size)
        if getsockopt(fd, SOL_L2CAP, L2CAP_CONNINFO, &info, &infoLength) == 0 { connectionHandle = info.hci_handle }
    }

    // MARK: PDUs

    private func send(_ pdu: [UInt8]) throws(SensorError) {
        let sent = pdu.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == pdu.count else { throw SensorError("Connection lost: \(String(cString: strerror(errno))); reconnecting") }
    }

    /// Receives one PDU within `timeoutS`; nil on timeout. Answers the peer's
    /// own requests so it never stalls waiting on us.
    private func receive(timeoutS: Double) throws(SensorError) -> [UInt8]? {
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&item, 1, Int32(max(0, timeoutS) * 1000))
        if ready < 0 && errno == EINTR { return nil }
        guard ready > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 600)
        let count = recv(fd, &buffer, buffer.count, 0)
        if count < 0 && (errno == EAGAIN || errno == EINTR) { return nil }
        guard count > 0 else {
            let reason = count == 0 ? "the sensor closed the link" : String(cString: strerror(errno))
            // The kernel reports the reset before the notifications still
            // queued on the socket; they remain readable: keep them.
            while true {
                let more = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                guard more > 0 else { break }
                if buffer[0] == Op.notification || buffer[0] == Op.indication, more >= 3 {
                    queued.append((UInt16(buffer[1]) | UInt16(buffer[2]) << 8, Array(buffer[3..<more])))
                }
            }
            throw SensorError("Connection lost (\(reason)): reconnecting")
        }
        let pdu = Array(buffer[0..<count])
        switch pdu[0] {
        case Op.mtuRequest:
            try send([Op.mtuResponse, UInt8(mtu & 0xFF), UInt8(mtu >> 8)])
            return try receive(timeoutS: timeoutS)
        case Op.indication:
            try send([Op.confirmation])
            return pdu
        case let op where op & 0x01 == 0 && op != Op.notification && op & 0x40 == 0:
            // Any other request from the peer: Request Not Supported.
            let handle = pdu.count >= 3 ? [pdu[1], pdu[2]] : [0, 0]
            try send([Op.error, op] + handle + [0x06])
            return try receive(timeoutS: timeoutS)
        default:
            return pdu
        }
    }

    /// Sends a request and waits for its response (or an Error Response),
    /// queueing notifications that arrive in between.
    private func request(_ pdu: [UInt8], expect: UInt8) throws(SensorError) -> [UInt8] {
        try send(pdu)
        let deadline = monotonicSeconds() + requestTimeoutS
        while true {
            let remaining = deadline - monotonicSeconds()
            guard remaining > 0, let response = try receive(timeoutS: remaining) else {
                throw SensorError("Cannot connect: the sensor did not answer (ATT 0x\(String(pdu[0], radix: 16))); restart the sensor and retry")
            }
            if response[0] == Op.notification || response[0] == Op.indication {
                if response.count >= 3 { queued.append((UInt16(response[1]) | UInt16(response[2]) << 8, Array(response[3...]))) }
                continue
            }
            if response[0] == expect { return response }
            if response[0] == Op.error, response.count >= 5, response[1] == pdu[0] { return response }
        }
    }

    private static func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
    private static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }

    /// Exchanges MTU (ask for `wanted`); returns the agreed one.
    @discardableResult
    public func exchangeMTU(_ wanted: Int = 247) throws(SensorError) -> Int {
        let response = try request([Op.mtuRequest] + Self.le16(UInt16(wanted)), expect: Op.mtuResponse)
        if response[0] == Op.mtuResponse, response.count >= 3 {
            mtu = max(23, min(wanted, Int(Self.u16(response, 1))))
        }
        return mtu
    }

    /// Primary services as (start, end, uuid).
    public func primaryServices() throws(SensorError) -> [(start: UInt16, end: UInt16, uuid: UUID128)] {
        var services: [(start: UInt16, end: UInt16, uuid: UUID128)] = []
        var start: UInt16 = 1
        while true {
            let response = try request([Op.readByGroupRequest] + Self.le16(start) + [0xFF, 0xFF, 0x00, 0x28], expect: Op.readByGroupResponse)
            guard response[0] == Op.readByGroupResponse, response.count >= 2 else { break }
            let length = Int(response[1])
            guard length == 6 || length == 20 else { break }
            var index = 2
            var last: UInt16 = start
            while index + length <= response.count {
                let handle = Self.u16(response, index), end = Self.u16(response, index + 2)
                let uuidBytes = response[(index + 4)..<(index + length)]
                let uuid = length == 6 ? UUID128(short: Self.u16(response, index + 4)) : UUID128(littleEndian: uuidBytes)
                services.append((handle, end, uuid))
                last = end
                index += length
            }
            if last == 0xFFFF || last < start { break }
            start = last + 1
        }
        return services
    }

    /// Characteristics between two handles.
    public func characteristics(start: UInt16, end: UInt16) throws(SensorError) -> [GATTCharacteristic] {
        var found: [GATTCharacteristic] = []
        var from = start
        while from <= end {
            let response = try request([Op.readByTypeRequest] + Self.le16(from) + Self.le16(end) + [0x03, 0x28], expect: Op.readByTypeResponse)
            guard response[0] == Op.readByTypeResponse, response.count >= 2 else { break }
            let length = Int(response[1])
            guard length == 7 || length == 21 else { break }
            var index = 2
            var last = from
            while index + length <= response.count {
                let declaration = Self.u16(response, index)
                let properties = response[index + 2]
                let value = Self.u16(response, index + 3)
                let uuid = length == 7 ? UUID128(short: Self.u16(response, index + 5)) : UUID128(littleEndian: response[(index + 5)..<(index + 21)])
                found.append(GATTCharacteristic(declarationHandle: declaration, properties: properties, valueHandle: value, uuid: uuid))
                last = declaration
                index += length
            }
            if last == 0xFFFF || last < from { break }
            from = last + 1
        }
        return found
    }

    /// The Client Characteristic Configuration descriptor (0x2902) between two handles.
    public func cccd(start: UInt16, end: UInt16) throws(SensorError) -> UInt16? {
        guard start <= end else { return nil }
        var from = start
        while from <= end {
            let response = try request([Op.findInfoRequest] + Self.le16(from) + Self.le16(end), expect: Op.findInfoResponse)
            guard response[0] == Op.findInfoResponse, response.count >= 2 else { return nil }
            let entry = response[1] == 1 ? 4 : 18
            var index = 2
            var last = from
            while index + entry <= response.count {
                let handle = Self.u16(response, index)
                if entry == 4, Self.u16(response, index + 2) == 0x2902 { return handle }
                last = handle
                index += entry
            }
            if last == 0xFFFF || last < from { return nil }
            from = last + 1
        }
        return nil
    }

    /// Write Request (acknowledged): returns false on an Error Response.
    public func write(handle: UInt16, _ value: [UInt8]) throws(SensorError) -> Bool {
        let response = try request([Op.writeRequest] + Self.le16(handle) + value, expect: Op.writeResponse)
        return response[0] == Op.writeResponse
    }

    /// Write Command (no response).
    public func writeCommand(handle: UInt16, _ value: [UInt8]) throws(SensorError) {
        try send([Op.writeCommand] + Self.le16(handle) + value)
    }

    /// The next notification or indication within `timeoutS`, nil on timeout.
    public func nextNotification(timeoutS: Double) throws(SensorError) -> (handle: UInt16, value: [UInt8])? {
        if !queued.isEmpty { return queued.removeFirst() }
        if let lost { throw lost }
        let deadline = monotonicSeconds() + timeoutS
        while true {
            let received: [UInt8]?
            do {
                received = try receive(timeoutS: deadline - monotonicSeconds())
            } catch {
                // Deliver what was still queued before the loss, then report it.
                lost = error
                if !queued.isEmpty { return queued.removeFirst() }
                throw error
            }
            guard let pdu = received else { return nil }
            if pdu[0] == Op.notification || pdu[0] == Op.indication, pdu.count >= 3 {
                return (Self.u16(pdu, 1), Array(pdu[3...]))
            }
            if monotonicSeconds() >= deadline { return nil }
        }
    }
}
