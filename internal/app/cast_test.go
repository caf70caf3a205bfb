package app_test

// signInCast is the companies and people most dashboard tests sign in as, each with the
// password the browser types: Acme's owner Ana and its member Mo, Globex's admin Gus and
// Initech's owner Ivy. A test's file goes on with its agents and projects.
const signInCast = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: globex, name: Globex}
  - {slug: initech, name: Initech}
` + signInPeople

// signInPeople is signInCast's people alone, for a file whose companies differ.
const signInPeople = `users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner, password: "demo-password-ana"}
  - {email: mo@acme.test, name: Mo, org: acme, role: member, password: "demo-password-mo"}
  - {email: gus@globex.test, name: Gus, org: globex, role: admin, password: "demo-password-gus"}
  - {email: ivy@initech.test, name: Ivy, org: initech, role: owner, password: "demo-password-ivy"}
`

// deskCompanies opens the desk tests' files: Acme (in Los Angeles) and Globex, both on
// the Scale plan. A file may list more companies after them.
const deskCompanies = `
organisations:
  - {slug: acme, name: Acme, plan: scale, timezone: America/Los_Angeles}
  - {slug: globex, name: Globex, plan: scale}
`
