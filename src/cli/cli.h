/* cli.h - the rewind command-line program: one function per subcommand.
 *
 * Each command gets argv starting at its own name (argv[0] = "inspect") and
 * returns the process exit status: 0 on success, 1 on a reported error, 2 on
 * a usage error. Commands print one-line errors on stderr as
 * "rewind CMD: message". */
#ifndef RW_CLI_CLI_H
#define RW_CLI_CLI_H

int rw_cmd_inspect(int argc, char **argv);

/* Prints "rewind CMD: " + message + newline on stderr. */
void rw_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
