import Foundation
import VBTDetection
import VBTQuery

/// The rep-detector's learned-pattern library and how it is kept in step: with the stations
/// (each takes `shared` when it is next fed, when its version is not `version`), with the
/// session-recorder (asked once for the patterns it holds, offered each one learned) and with
/// its file (handed to the writer at most once a housekeeping). A value: no socket, file or
/// clock; `DetectorRuntime` asks, posts and writes (PatternSyncTests).
struct PatternSync {
    /// Patterns by exercise.
    private(set) var library: PatternLibrary
    /// The library's patterns as every station is given them, and the version they are: a
    /// station takes them when next fed, not all at once (a thousand stations end their sets
    /// within seconds, and each set of 3 reps or more is a pattern learned: giving each to every
    /// station would be a million updates a wave).
    private(set) var shared: [RepPattern] = []
    private(set) var version = 0
    /// The question for the recorder's patterns, while unanswered: its id and when to give up.
    private(set) var question: (id: String, deadline: Double)?
    /// A pattern was learned since the library was last handed to its file's writer.
    private(set) var unsaved = false
    /// Whether the library has a file (`--patterns`): without one nothing is ever unsaved.
    let filed: Bool
    /// Patterns as the recorder keeps them: keys sorted, infinities as strings.
    private let encoder = JSONEncoder()

    /// `library` as read at start; `filed`: it has a file to be written to.
    init(library: PatternLibrary, filed: Bool) {
        (self.library, self.filed) = (library, filed)
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        encoder.outputFormatting = [.sortedKeys]
        changed()
    }

    /// Whether the recorder is to be asked: a detector with no pattern at all asks, once, at start.
    var asksRecorder: Bool { library.patterns.isEmpty }

    /// The recorder was asked (question `id`), and is waited for until `deadline`.
    mutating func asked(id: String, deadline: Double) { question = (id, deadline) }

    /// Whether a reply of `id` answers the question (others are a pattern's confirmation).
    func answers(_ id: String) -> Bool { question?.id == id }

    /// The recorder's answer: each pattern that reads is added (a newer detector's it cannot
    /// read is left out). How many were added.
    mutating func answered(_ stored: [StoredPattern]) -> Int {
        question = nil
        var added = 0
        for item in stored {
            guard let pattern = try? JSONDecoder().decode(RepPattern.self, from: Data(item.json.utf8)) else { continue }
            library.add(pattern)
            added += 1
        }
        if added > 0 { changed() }
        return added
    }

    /// The question is given up (the recorder failed): true when one was waiting.
    mutating func giveUp() -> Bool {
        defer { question = nil }
        return question != nil
    }

    /// Gives the question up when `now` is past its deadline: true when it just was.
    mutating func expire(now: Double) -> Bool {
        guard let question, now > question.deadline else { return false }
        self.question = nil
        return true
    }

    /// A pattern learned: added, given to every station, due to be written; what to offer the
    /// recorder (`offer`: there is one), named by exercise and recording time.
    mutating func learn(_ pattern: RepPattern, offer: Bool) -> StoredPattern? {
        library.add(pattern)
        changed()
        unsaved = filed
        guard offer, let json = try? encoder.encode(pattern) else { return nil }
        return StoredPattern(
            exercise: pattern.exercise, name: "\(pattern.exercise)-\(Int64(pattern.recordedT * 1e6))", ts: pattern.recordedT,
            json: String(decoding: json, as: UTF8.self))
    }

    /// The library to write when a pattern was learned since it was last taken; nil otherwise.
    mutating func takeUnsaved() -> PatternLibrary? {
        guard unsaved else { return nil }
        unsaved = false
        return library
    }

    /// A write failed: the library is written again with the next.
    mutating func saveFailed() { unsaved = filed }

    /// After a takeover: the library its predecessor saved before handing over, when it reads
    /// (nil: the one held stays), given to every station.
    mutating func replace(with saved: PatternLibrary?) {
        if let saved { library = saved }
        changed()
    }

    /// Every station is to take the library's patterns anew.
    private mutating func changed() {
        shared = library.patterns.values.flatMap { $0 }
        version += 1
    }
}
