/**
 * Twenty natural queries for the catalog of test/fixtures/tool-catalog.ts, written from the
 * tools' descriptions (what a user would ask a model to do), never from their names, and the
 * tool each must find in the top three, as the aggregated endpoint `/mcp` names it.
 */
export const QUERIES: ReadonlyArray<[query: string, expected: string]> = [
  ['open a PR to merge my feature branch', 'github__create_pull_request'],
  ['find where a function is defined in the code', 'github__search_code'],
  ['re-run the failed CI job', 'github__rerun_workflow'],
  ['stop GitHub from POSTing events to our URL', 'github__delete_webhook'],
  ['list the people who may push to a repository', 'github__list_collaborators'],
  ['read a file from the repository on main', 'github__get_file_contents'],
  ['move the ticket to Done', 'work__jira-transition-issue'],
  ['run a JQL query for open bugs', 'work__jira-search-jql'],
  ['log two hours of time spent on a ticket', 'work__jira-create-worklog'],
  ['start a new sprint for the team', 'work__jira-create-sprint'],
  ['react with a thumbs up emoji to a message', 'work__slackAddReaction'],
  ['set my status to on vacation', 'work__slackSetStatus'],
  ['remind me tomorrow to review the release', 'work__slackCreateReminder'],
  ['send a DM to a colleague', 'work__slackOpenDirectMessage'],
  ['restart a virtual machine', 'cloud__rebootEc2Instance'],
  ['run a serverless function with a JSON payload', 'cloud__invokeLambdaFunction'],
  ['how much did we spend on cloud last month', 'cloud__getCostAndUsage'],
  ['temporary download link for a file in a bucket', 'cloud__getS3ObjectPresignedUrl'],
  ['run more containers for the service', 'cloud__scaleEcsService'],
  ['create a kubernetes cluster on google cloud', 'cloud__createGkeCluster'],
];
