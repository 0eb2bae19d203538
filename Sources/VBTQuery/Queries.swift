import Foundation
import VBTWire

// Each query's argument and result types, tied to its name (proto/query.md): a caller
// asks `client.ask(.history, HistoryArgs(...))` and gets `[SetSummary]`, and asking
// with the wrong arguments or reading the answer as the wrong type does not compile.

/// A query the recorder answers: its name, the arguments it takes and what it returns.
///
/// Only this file makes them (the initialiser is internal), one per `QueryName` case.
/// They are static members of constrained extensions rather than of a namespace so
/// that a call reads as the name did (`.history`): the generic parameters of `ask`
/// and `request` are bound by the member chosen, and the arguments must fit them.
public struct Query<Arguments: Codable & Sendable, Result: Codable & Sendable>: Sendable {
    /// The name a request carries.
    public let name: QueryName

    init(_ name: QueryName) { self.name = name }
}

extension Query where Arguments == AthleteInput, Result == AthleteProfile {
    public static var athleteAdd: Self { Self(.athleteAdd) }
}
extension Query where Arguments == AthleteListArgs, Result == [AthleteProfile] {
    /// The arguments may be left out (archived athletes are then not listed).
    public static var athleteList: Self { Self(.athleteList) }
}
extension Query where Arguments == IdArgs, Result == AthleteProfile {
    public static var athleteShow: Self { Self(.athleteShow) }
}
extension Query where Arguments == WeighInArgs, Result == AthleteProfile {
    public static var athleteWeighIn: Self { Self(.athleteWeighIn) }
}
extension Query where Arguments == AthleteEditArgs, Result == AthleteProfile {
    public static var athleteEdit: Self { Self(.athleteEdit) }
}
extension Query where Arguments == ArchiveArgs, Result == AthleteProfile {
    public static var athleteArchive: Self { Self(.athleteArchive) }
}
extension Query where Arguments == EraseArgs, Result == EraseResult {
    public static var athleteErase: Self { Self(.athleteErase) }
}
extension Query where Arguments == ReassignArgs, Result == SetSummary {
    public static var setReassign: Self { Self(.setReassign) }
}
extension Query where Arguments == AnnotateArgs, Result == SetSummary {
    public static var setAnnotate: Self { Self(.setAnnotate) }
}
extension Query where Arguments == NoArgs, Result == [ExerciseRecord] {
    public static var exerciseList: Self { Self(.exerciseList) }
}
extension Query where Arguments == IdArgs, Result == ExerciseRecord {
    public static var exerciseShow: Self { Self(.exerciseShow) }
}
extension Query where Arguments == ExerciseInput, Result == ExerciseRecord {
    public static var exerciseAdd: Self { Self(.exerciseAdd) }
}
extension Query where Arguments == Plan, Result == Plan {
    public static var planCreate: Self { Self(.planCreate) }
}
extension Query where Arguments == IdArgs, Result == Plan {
    public static var planShow: Self { Self(.planShow) }
}
extension Query where Arguments == NoArgs, Result == [Plan] {
    public static var planList: Self { Self(.planList) }
}
extension Query where Arguments == StationArgs, Result == AssignmentRecord? {
    /// nil: the station has no assignment (or none by that command).
    public static var assignmentGet: Self { Self(.assignmentGet) }
}
extension Query where Arguments == NoArgs, Result == [StationRecord] {
    public static var stationList: Self { Self(.stationList) }
}
extension Query where Arguments == StationAddArgs, Result == StationChange {
    public static var stationAdd: Self { Self(.stationAdd) }
}
extension Query where Arguments == StationRenameArgs, Result == StationChange {
    public static var stationRename: Self { Self(.stationRename) }
}
extension Query where Arguments == StationNameArgs, Result == StationChange {
    public static var stationRemove: Self { Self(.stationRemove) }
}
extension Query where Arguments == AthleteArgs, Result == StoredCalibration? {
    /// nil: the athlete has no stored calibration.
    public static var calibrationGet: Self { Self(.calibrationGet) }
}
extension Query where Arguments == ExerciseFilterArgs, Result == [StoredPattern] {
    /// The arguments may be left out (every exercise's patterns).
    public static var patternList: Self { Self(.patternList) }
}
extension Query where Arguments == StoredPattern, Result == StoredPattern {
    public static var patternPut: Self { Self(.patternPut) }
}
extension Query where Arguments == HistoryArgs, Result == [SetSummary] {
    /// The arguments may be left out (the latest sets of everyone).
    public static var history: Self { Self(.history) }
}
extension Query where Arguments == ProgressArgs, Result == ProgressReport {
    public static var progress: Self { Self(.progress) }
}
extension Query where Arguments == ReportArgs, Result == SessionReport {
    public static var report: Self { Self(.report) }
}
extension Query where Arguments == WeekArgs, Result == WeekStats {
    /// The arguments may be left out (everyone's current week, UTC).
    public static var statsWeek: Self { Self(.statsWeek) }
}
extension Query where Arguments == PageArgs, Result == TablePage {
    public static var exportPage: Self { Self(.exportPage) }
}
extension Query where Arguments == NoArgs, Result == RecorderStatus {
    public static var status: Self { Self(.status) }
}
extension Query where Arguments == BackupArgs, Result == BackupResult {
    public static var backup: Self { Self(.backup) }
}
extension Query where Arguments == ReadinessArgs, Result == [SessionReadiness] {
    public static var readiness: Self { Self(.readiness) }
}
