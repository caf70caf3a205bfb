package auth

// CITokenPrefix starts a project CI token: CI confirms knowledge candidates over HTTP with
// it (`relayroom admin project ci-token` issues one, printed once, stored hashed).
const CITokenPrefix = "qyt_ci_"
