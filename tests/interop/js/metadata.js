// Prints the cluster metadata kafkajs sees, as JSON.
const { Kafka, logLevel } = require('kafkajs')

async function main () {
  const kafka = new Kafka({ clientId: 'kcoord-interop', brokers: [process.argv[2]], logLevel: logLevel.WARN })
  const admin = kafka.admin()
  await admin.connect()
  const md = await admin.fetchTopicMetadata()
  const cluster = await admin.describeCluster()
  await admin.disconnect()
  console.log(JSON.stringify({
    topics: md.topics.map(t => ({ name: t.name, partitions: t.partitions.map(p => p.partitionId) })),
    brokers: cluster.brokers,
    controller: cluster.controller
  }))
}

main().catch(e => { console.error(e); process.exit(1) })
