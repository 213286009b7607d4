"""Reference clients (desktop device agent, relay CLI, examples); none yet."""
