import VBTQuery

extension ChartPanel.LoadVelocityPlot {
    /// An athlete's load-velocity chart for one exercise from the recorder's progress (the best
    /// mean velocity at each load), fitted as the detector fits its profiles
    /// (`LoadVelocityProfile.fit`), with the exercise's MVT and the e1RM where they meet.
    public init(progress: ExerciseProgress, mvtMps: Double) {
        let points = progress.bestByLoad.map { LoadVelocityProfile.Point(loadKg: $0.loadKg, meanVelocityMps: $0.bestMeanVelocityMps) }
        let profile = LoadVelocityProfile.fit(
            station: "", athlete: nil, exercise: ExerciseProfile(name: progress.exercise, romMm: 0, mvtMps: mvtMps), points: points)
        self.init(
            points: points.map { (x: $0.loadKg, y: $0.meanVelocityMps) },
            line: profile.map { (interceptMps: $0.interceptMps, slopeMpsPerKg: $0.slopeMpsPerKg) }, mvtMps: mvtMps,
            e1rmKg: profile?.e1rmKg.flatMap { $0.isFinite && $0 > 0 ? $0 : nil })
    }
}
