// Type-checked (tsc --noEmit) in each fresh project: the package's types resolve for
// import and for require, with the generated message types under their public names.
import {
  type ClaimResponse, Client, ConfigError, type Duration, EmptyTokenError, type OperationState, parseAddress,
  type Result, Success,
} from "@idemd/client";

export async function typed(): Promise<string> {
  const client: Client = new Client("https://idemd.example:443", "idem_x");
  const answer: ClaimResponse = await client.claim("op", "key", { jsonPayload: "{}" });
  const lease: Duration | null | undefined = answer.acquired?.ownership?.lease;
  const state: OperationState | undefined = answer.completed?.state;
  const result: Result = await client.executeOnce("op", "key", {}, async () => new Success(Buffer.from("x")));
  const refused: boolean = new EmptyTokenError("x") instanceof ConfigError;
  // Were the package's types not found (any), these would not be errors and tsc would
  // say so: "Unused '@ts-expect-error' directive".
  // @ts-expect-error: a token is a string
  new Client("h:1", 42);
  // @ts-expect-error: an outcome is a name
  const wrong: number = answer.outcome;
  client.close();
  return `${parseAddress("h:1").target} ${String(lease?.seconds)} ${String(state)} ${result.body.length} ${refused} ${wrong}`;
}
