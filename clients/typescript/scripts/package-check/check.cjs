// Run from a fresh CommonJS project (a default `npm init`) that installed the packed
// tarball: require() resolves the package's CommonJS build.
const { Client, Success } = require("@idemd/client");
const { check } = require("./common.cjs");

check("commonjs", Client, Success).catch((error) => {
  console.error(error);
  process.exit(1);
});
