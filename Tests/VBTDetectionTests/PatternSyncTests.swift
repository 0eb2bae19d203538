import Foundation
import Testing
import VBTQuery

@testable import VBTDetection
@testable import VBTDetectorRole

/// The learned-pattern library's sync alone: no recorder, no file, no clock.
/// (DetectorRuntimeTests and SwapProcessTests run it with a recorder and a file.)
@Suite("pattern sync, as a value")
struct PatternSyncTests {
    static func pattern(_ exercise: String, at t: Double, owner: String = "ana") -> RepPattern {
        let curve = (0..<RepPattern.length).map { Double($0) / Double(RepPattern.length - 1) }
        return RepPattern(exercise: exercise, curve: curve, loadKg: 80, reps: 3, recordedT: t, owner: owner)
    }

    @Test("a pattern learned goes to every station (a new version), is offered to the recorder and is due to be written, once")
    func learn() throws {
        var sync = PatternSync(library: PatternLibrary(), filed: true)
        let before = sync.version
        #expect(sync.asksRecorder, "no pattern: the recorder is asked")
        let learned = sync.learn(Self.pattern("squat", at: 1_800_000_000.25), offer: true)
        let offered = try #require(learned)
        #expect(sync.version == before + 1 && sync.shared.map(\.exercise) == ["squat"])
        #expect(offered.exercise == "squat" && offered.name == "squat-1800000000250000" && offered.ts == 1_800_000_000.25)
        #expect(try JSONDecoder().decode(RepPattern.self, from: Data(offered.json.utf8)) == Self.pattern("squat", at: 1_800_000_000.25))
        let written = sync.takeUnsaved()
        #expect(written?.patterns["squat"]?.count == 1)
        #expect(sync.takeUnsaved() == nil, "written once")
        sync.saveFailed()
        #expect(sync.takeUnsaved() == written, "a failed write is written again")
        #expect(!sync.asksRecorder)
    }

    @Test("without a recorder nothing is offered; without a file nothing is due to be written")
    func noRecorderNoFile() {
        var sync = PatternSync(library: PatternLibrary(), filed: false)
        let offered = sync.learn(Self.pattern("bench", at: 5), offer: false)
        #expect(offered == nil && sync.shared.count == 1)
        let unsaved = sync.takeUnsaved()
        sync.saveFailed()
        let afterFailure = sync.takeUnsaved()
        #expect(unsaved == nil && afterFailure == nil)
    }

    @Test("the recorder's answer adds the patterns that read, a new version only when some did")
    func answer() throws {
        var sync = PatternSync(library: PatternLibrary(), filed: true)
        sync.asked(id: "q-1", deadline: 10)
        #expect(sync.answers("q-1") && !sync.answers("q-2"), "another id is a pattern's confirmation")
        let good = Self.pattern("deadlift", at: 7)
        let json = String(decoding: try JSONEncoder().encode(good), as: UTF8.self)
        let version = sync.version
        let added = sync.answered([
            StoredPattern(exercise: "deadlift", name: "deadlift-7", ts: 7, json: json),
            StoredPattern(exercise: "deadlift", name: "broken", ts: 8, json: "{\"curve\": 3}"),
        ])
        #expect(added == 1 && sync.library.patterns["deadlift"] == [good] && sync.version == version + 1)
        #expect(sync.question == nil && !sync.answers("q-1"), "answered once")
        sync.asked(id: "q-2", deadline: 10)
        let none = sync.answered([StoredPattern(exercise: "x", name: "broken", ts: 1, json: "nope")])
        #expect(none == 0 && sync.version == version + 1, "nothing read: the stations keep theirs")
        #expect(sync.takeUnsaved() == nil, "what the recorder holds is not written back")
    }

    @Test("an unanswered question is given up at its deadline, or at once when the recorder fails; said once")
    func giveUp() {
        var sync = PatternSync(library: PatternLibrary(), filed: true)
        sync.asked(id: "q-1", deadline: 10)
        let early = sync.expire(now: 10)
        let late = sync.expire(now: 10.01)
        let again = sync.expire(now: 11)
        #expect(!early && late && !again)
        sync.asked(id: "q-2", deadline: 10)
        let failed = sync.giveUp()
        let failedAgain = sync.giveUp()
        #expect(failed && !failedAgain && sync.question == nil)
    }

    @Test("after a takeover the predecessor's saved library replaces the one held, and every station takes it anew")
    func replace() {
        var sync = PatternSync(library: PatternLibrary(), filed: true)
        _ = sync.learn(Self.pattern("squat", at: 1), offer: false)
        var saved = PatternLibrary()
        saved.add(Self.pattern("squat", at: 1))
        saved.add(Self.pattern("press", at: 2))
        let version = sync.version
        sync.replace(with: saved)
        #expect(sync.library == saved && Set(sync.shared.map(\.exercise)) == ["squat", "press"] && sync.version == version + 1)
        sync.replace(with: nil)
        #expect(sync.library == saved && sync.version == version + 2, "no file: the library held stays, given again")
    }
}
