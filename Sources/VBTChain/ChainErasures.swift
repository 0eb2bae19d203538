// An athlete erased at a gym is erased in the chain store too. The gym's store keeps, per erasure,
// the pseudonym her history now carries and a digest of her old id (never the id itself); the
// uplink sends each erasure once, in the transaction that moves the erasures cursor, through
// chain_erase: it records the erasure and, the first time only, finds her old id among the gym's
// athletes and links by the digest and rewrites every row of that gym that carries it. The gym's
// role may not delete, and HQ's link tables are not its to touch, so chain_erase runs with its
// owner's (the chain admin's) rights and refuses any role but the gym's own.

extension ChainSchema {
    /// Erasures and the function that applies one.
    static let c4Erasures = """
        CREATE TABLE erasures (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            pseudonym TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            athlete_sha256 TEXT,
            rows_rewritten BIGINT NOT NULL DEFAULT 0,
            applied_ts TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (gym, pseudonym)
        );
        ALTER TABLE erasures ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own_gym ON erasures USING (current_user = 'vbt_gym_' || gym)
            WITH CHECK (current_user = 'vbt_gym_' || gym);
        CREATE FUNCTION chain_erase(p_gym TEXT, p_pseudonym TEXT, p_ts DOUBLE PRECISION, p_sha256 TEXT) RETURNS BIGINT
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
        DECLARE
            v_id TEXT;
            v_name TEXT;
            v_chain TEXT;
            v_table TEXT;
            v_n BIGINT;
            v_rows BIGINT := 0;
        BEGIN
            IF session_user <> 'vbt_gym_' || p_gym THEN
                RAISE EXCEPTION 'only the role of gym % applies its erasures', p_gym USING ERRCODE = '42501';
            END IF;
            INSERT INTO erasures (gym, pseudonym, ts, athlete_sha256) VALUES (p_gym, p_pseudonym, p_ts, p_sha256)
                ON CONFLICT DO NOTHING;
            IF NOT FOUND OR p_sha256 IS NULL THEN
                RETURN 0;  -- applied before (a retry), or an erasure from before digests: nothing to find her by
            END IF;
            SELECT c.id, c.name INTO v_id, v_name FROM (
                SELECT id, name FROM athletes WHERE gym = p_gym
                UNION ALL SELECT athlete, NULL FROM chain_links WHERE gym = p_gym
            ) c WHERE encode(sha256(convert_to(p_pseudonym || chr(10) || c.id, 'UTF8')), 'hex') = p_sha256
            ORDER BY c.name NULLS LAST LIMIT 1;
            IF v_id IS NULL THEN
                RETURN 0;  -- erased before anything of hers reached the chain store
            END IF;
            FOREACH v_table IN ARRAY ARRAY['sessions', 'sets', 'reps', 'rejected', 'profiles', 'posture_changes'] LOOP
                EXECUTE format('UPDATE %I SET athlete = $2 WHERE gym = $1 AND athlete = $3', v_table)
                    USING p_gym, p_pseudonym, v_id;
                GET DIAGNOSTICS v_n = ROW_COUNT;
                v_rows := v_rows + v_n;
            END LOOP;
            -- Free text may name her, as at the gym: a set's note, an alert's message.
            UPDATE sets SET note = replace(replace(note, coalesce(nullif(v_name, ''), v_id), p_pseudonym), v_id, p_pseudonym)
                WHERE gym = p_gym AND athlete = p_pseudonym AND note IS NOT NULL;
            UPDATE alerts SET athlete = p_pseudonym, json = (
                SELECT (j || jsonb_build_object('athlete', p_pseudonym) || CASE WHEN jsonb_typeof(j -> 'message') = 'string'
                    THEN jsonb_build_object('message', replace(replace(j ->> 'message', coalesce(nullif(v_name, ''), v_id), p_pseudonym),
                        v_id, p_pseudonym))
                    ELSE '{}'::jsonb END)::text
                FROM (SELECT json::jsonb AS j) x)
                WHERE gym = p_gym AND athlete = v_id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_rows := v_rows + v_n;
            UPDATE plans SET athlete = NULL WHERE gym = p_gym AND athlete = v_id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_rows := v_rows + v_n;
            DELETE FROM athletes WHERE gym = p_gym AND id = v_id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_rows := v_rows + v_n;
            -- Her link goes; the chain athlete (HQ's name for her) too when no other gym's link is left.
            DELETE FROM chain_links WHERE gym = p_gym AND athlete = v_id RETURNING chain_id INTO v_chain;
            IF v_chain IS NOT NULL THEN
                DELETE FROM chain_athletes a WHERE a.chain_id = v_chain
                    AND NOT EXISTS (SELECT 1 FROM chain_links l WHERE l.chain_id = v_chain);
            END IF;
            UPDATE erasures SET rows_rewritten = v_rows WHERE gym = p_gym AND pseudonym = p_pseudonym;
            RETURN v_rows;
        END
        $fn$;
        REVOKE ALL ON FUNCTION chain_erase(TEXT, TEXT, DOUBLE PRECISION, TEXT) FROM PUBLIC;
        """
}
