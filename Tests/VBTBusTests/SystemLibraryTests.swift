import CBlueZ
import Testing
import VBTBus
import VBTWire

@Suite("System libraries")
struct SystemLibraryTests {
    @Test("libzmq is 4.x with the stable API the bus relies on")
    func libzmqVersion() {
        let major = ZMQContext.version.split(separator: ".").first.flatMap { Int($0) }
        #expect(major == 4)
    }

    @Test("BlueZ's libbluetooth links: a device address survives text -> bdaddr_t -> text")
    func bluezAddress() {
        var address = bdaddr_t()
        #expect(str2ba("C0:FF:EE:12:34:56", &address) == 0)
        // bdaddr_t is little-endian: the last octet of the text comes first.
        #expect(address.b.0 == 0x56 && address.b.5 == 0xC0)
        var text = [CChar](repeating: 0, count: 18)
        #expect(ba2str(&address, &text) == 17)
        #expect(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == "C0:FF:EE:12:34:56")
    }
}
