import ArgumentParser
import Foundation
import VBTQuery

// `vbt backup`: an online copy of the live history (proto/query.md, `backup`).

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the live history database to a backup file, checked, while the recorder keeps recording.",
        discussion: """
            The session-recorder copies its database with SQLite's online backup into backups/ beside it
            (e.g. data/backups/NAME.sqlite): a consistent copy of everything stored before the backup began;
            messages arriving meanwhile wait and are stored after. The copy is checked (PRAGMA integrity_check)
            and its rows counted. An existing backup is never replaced. Needs a coach's or a service's key.
            To restore: stop the session-recorder, copy the backup over its database (VBT_DB, default
            data/vbt.sqlite; remove the -wal and -shm files beside it), start it again.
            """)

    @Argument(help: "The backup's name: letters, digits, '.', '_', '-' (\".sqlite\" is added without an extension).")
    var name: String

    @OptionGroup var recorder: RecorderOptions

    func run() throws {
        let result = try recorder.withClient { try $0.ask(.backup, BackupArgs(name: name)) }
        recorder.output(result) {
            let rows = result.rows.keys.sorted().map { "\($0) \(result.rows[$0]!)" }.joined(separator: ", ")
            return "backup \(result.path): \(result.bytes) bytes, integrity \(result.integrity)\nrows: \(rows)\n"
        }
    }
}

/// `vbt set reassign` and `vbt set note`: a stored set attributed to the right athlete, exercise
/// or load; its RPE and note.
struct SetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Stored sets: reassign, note.", subcommands: [Reassign.self, Note.self])

    struct Note: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record the athlete's RPE and a note on a stored set.",
            discussion: """
                e.g. vbt set note rack-01-set-3 --rpe 8.5 --note "grindy last rep"
                RPE is 1 to 10 in steps of 0.5; a note is up to 500 characters. --clear empties both (then sets
                what else is given). vbt history shows them; vbt export carries them (sets: rpe, note).
                The set's id is in vbt history --json.
                """)
        @Argument(help: "The set's id.") var set: String
        @Option(help: "Rate of perceived exertion, 1-10 in steps of 0.5.") var rpe: Double?
        @Option(help: "A note, up to 500 characters.") var note: String?
        @Flag(help: "Empty the set's RPE and note.") var clear = false
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            guard rpe != nil || note != nil || clear else { throw ValidationError("give --rpe, --note or --clear") }
        }

        func run() throws {
            let summary = try recorder.withClient {
                try $0.ask(.setAnnotate, AnnotateArgs(set: set, rpe: rpe, note: note, clear: clear ? true : nil))
            }
            recorder.output(summary) {
                "set \(summary.id): RPE \(summary.rpe.map { String(format: "%g", $0) } ?? "-"), note \(summary.note.map { "\"\($0)\"" } ?? "-")\n"
            }
        }
    }

    struct Reassign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Attribute a stored set and its reps to another athlete, exercise or load.",
            discussion: "For a set lifted before the station was assigned, or under the wrong athlete. The set's id is in vbt history --json.")
        @Argument(help: "The set's id.") var set: String
        @Option(help: "The athlete who lifted it.") var athlete: String?
        @Option(help: "The exercise.") var exercise: String?
        @Option(help: "The load, kg.") var load: Double?
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            guard athlete != nil || exercise != nil || load != nil else { throw ValidationError("give --athlete, --exercise or --load") }
        }

        func run() throws {
            let summary = try recorder.withClient {
                try $0.ask(.setReassign, ReassignArgs(set: set, athlete: athlete, exercise: exercise, loadKg: load))
            }
            recorder.output(summary) {
                "set \(summary.id): \(summary.athlete ?? "-"), \(summary.exercise ?? "-")\(summary.loadKg.map { String(format: " at %g kg", $0) } ?? ""), \(summary.reps) reps\n"
            }
        }
    }
}
