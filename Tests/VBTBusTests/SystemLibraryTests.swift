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

@Suite("Heap pages given back", .serialized)
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

    @Test("residentBytes reads what statm says, in bytes")
    func resident() throws {
        let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
        let before = Self.residentPages() * pageBytes
        let read = try #require(HeapTrim.residentBytes)
        let after = Self.residentPages() * pageBytes
        // Within what this process's memory did between the two other readings (a few pages either way).
        #expect(read >= min(before, after) - 64 * pageBytes && read <= max(before, after) + 64 * pageBytes, "\(before) \(read) \(after)")
        #expect(read > 1 << 20)
    }

    @Test(
        "a trim is due when the program is well above its own size, at most every interval, and again after a queue that was still full has drained"
    )
    func schedule() {
        let mb = 1 << 20
        var schedule = HeapTrimSchedule()
        func due(_ residentMB: Int, at now: Double) -> Bool { schedule.due(residentBytes: residentMB * mb, now: now) }
        #expect(!due(30, at: 0), "the first look only notes the program's size")
        #expect(!due(40, at: 1), "10 MB above: not worth it")
        #expect(due(90, at: 2), "a queue's worth above")
        // The queue was still full: the trim gave little back.
        schedule.trimmed(residentBytes: 85 * mb, now: 2)
        #expect(!due(85, at: 5), "not again within the interval")
        #expect(due(85, at: 12), "after it: the queue may have drained since")
        schedule.trimmed(residentBytes: 31 * mb, now: 12)
        #expect(!due(32, at: 30), "back to its own size")
        #expect(!due(25, at: 40))
        #expect(due(42, at: 50), "the size it came down to is the one grown from")
    }

    @Test("a schedule's run trims when due and takes what is resident after the trim as the program's size")
    func scheduleRuns() {
        let mb = 1 << 20
        final class Heap {
            var resident = 30 << 20
            var trims = 0
        }
        let heap = Heap()
        var schedule = HeapTrimSchedule()
        func run(at now: Double) -> Bool {
            schedule.run(
                now: now, resident: { heap.resident },
                trim: {
                    heap.trims += 1; heap.resident = 28 << 20
                })
        }
        #expect(!run(at: 0), "the first look notes the size")
        heap.resident = 100 * mb  // a consumer's queue, drained but resident
        #expect(run(at: 1) && heap.trims == 1)
        heap.resident = 40 * mb
        #expect(!run(at: 20), "12 MB above the 28 MB it came down to: not due")
        heap.resident = 45 * mb
        #expect(run(at: 21) && heap.trims == 2)
    }
}
