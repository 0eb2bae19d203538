import CBlueZ
import Foundation
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

@Suite("Heap pages given back")
struct HeapTrimTests {
    /// Resident pages of this process (statm's second field), in pages.
    static func residentPages() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        return Int(text.split(separator: " ")[1]) ?? 0
    }

    @Test("after a backlog of small blocks is freed, malloc_trim is found and gives their pages back")
    func givesBack() {
        #expect(HeapTrim.isAvailable, "glibc's malloc_trim found")
        // 100 MB of 512-byte blocks, as a queue of messages holds them, touched, then freed.
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(200_000)
        for _ in 0..<200_000 {
            let block = malloc(512)!
            memset(block, 1, 512)
            blocks.append(block)
        }
        let held = Self.residentPages()
        for block in blocks { free(block) }
        #expect(HeapTrim.giveBackFreed(), "whole free pages were returned")
        let after = Self.residentPages()
        #expect(held - after > 12_800, "at least 50 MB of the 100 MB left (pages: \(held) held, \(after) after)")
    }
}
