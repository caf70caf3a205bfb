package pg

// RegisterUUIDForTest puts the uuid codec on a map of a test's own.
var RegisterUUIDForTest = registerUUID
