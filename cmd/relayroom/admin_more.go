package main

// moreAdminCommands lists the admin command sets of the toolsets, each defined in its
// own admin_<area>.go file.
func moreAdminCommands() []map[string]adminCommand {
	return []map[string]adminCommand{
		threadsAdminCommands(),
		wakeAdminCommands(),
		deskAdminCommands(),
		oauthAdminCommands(),
	}
}
